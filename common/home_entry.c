/* Home-relative entry names and the built-in protected list (home_entry.h). */
#include "common/home_entry.h"

#include <errno.h>
#include <string.h>

#include "common/macros.h"
#include "common/why.h"

const struct he_default he_protect_defaults[] = {
    /* lyh's own config and trust store: the next `lyh run` reads them */
    {".config/lianyaohu", true},
    /* shell start-up and logout files */
    {".profile", false},      {".bashrc", false},      {".bash_profile", false},
    {".bash_aliases", false}, {".bashrc.d", false},    /* Debian's and Fedora's .bashrc read them */
    {".bash_login", false},   {".bash_logout", false}, {".zshenv", false},
    {".zprofile", false},     {".zshrc", false},       {".zlogin", false},
    {".zlogout", false},      {".kshrc", false},       {".mkshrc", false},
    {".cshrc", false},        {".tcshrc", false},      {".login", false},
    {".logout", false},       {".config/fish", false}, {".pam_environment", false},
    {".xprofile", false},     {".xsessionrc", false},  {".xinitrc", false},
    /* git (core.fsmonitor, hooksPath, aliases run programs), ssh, gnupg */
    {".gitconfig", false},    {".config/git", true},   {".ssh", true},
    {".gnupg", false},
    /* tmux and direnv run what their config says */
    {".tmux.conf", false},    {".config/tmux", false}, {".config/direnv", false},
    /* what systemd --user, D-Bus activation and desktop sessions start */
    {".local/share/dbus-1/services", false},
    {".config/systemd/user", true},        {".local/share/systemd/user", true},
    {".config/environment.d", true},       {".config/autostart", true},
    {".local/share/applications", false},
    /* directories a default ~/.profile (or rustup's env) puts on PATH, and
     * what Python runs at every start (.pth files in the user site) */
    {".local/bin", true},     {"bin", false},          {".cargo/bin", false},
    {".cargo/env", false},    {".local/lib", false},
    /* editors' start-up files */
    {".vimrc", false},        {".vim", false},         {".config/nvim", false},
    {".emacs", false},        {".emacs.d", false},
};
const size_t he_protect_defaults_count = ARRAY_SIZE(he_protect_defaults);

int he_check(const char *in, char *canon, char *why, size_t whylen) {
    const char *s = in;
    size_t n;

    if (!s) {
        set_why(why, whylen, "no name");
        return -EINVAL;
    }
    if (strncmp(s, "~/", 2) == 0)
        s += 2;
    n = strlen(s);
    while (n > 0 && s[n - 1] == '/')
        n--;
    if (n == 0) {
        set_why(why, whylen, "names an entry of your home (e.g. \".npmrc\" or \"~/.config/foo\"), "
                             "not the home itself");
        return -EINVAL;
    }
    if (s[0] == '/') {
        set_why(why, whylen, "must be relative to your home (\"~/NAME\" or \"NAME\")");
        return -EINVAL;
    }
    if (n >= HE_NAME_MAX) {
        set_why(why, whylen, "longer than %d bytes", HE_NAME_MAX - 1);
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e || c == '\\') {
            set_why(why, whylen, "only printable ASCII without '\\\\'");
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && s[j] != '/')
            j++;
        size_t len = j - i;
        /* "~" too: "~/~/x" would be "~/x" once checked and "x" checked
         * again (a stored name must come back as itself) */
        if (len == 0 || (len == 1 && (s[i] == '.' || s[i] == '~')) ||
            (len == 2 && s[i] == '.' && s[i + 1] == '.')) {
            set_why(why, whylen, "empty, \".\", \"..\" and \"~\" components are not allowed");
            return -EINVAL;
        }
        i = j + 1;
    }
    memcpy(canon, s, n);
    canon[n] = '\0';
    return 0;
}

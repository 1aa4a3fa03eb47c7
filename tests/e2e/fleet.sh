#!/usr/bin/env bash
# End-to-end test of docs/admin.md's fleet set-up: three "hosts", each a
# network namespace with its own lyhd and its own OpenSSH sshd, and an admin
# namespace that runs contrib/ansible's playbook against them over ssh, as root
# with a key, the way a config-management run does. Checks what the issue asks
# of the role: a run that applies the policy (changed), a second run that
# changes nothing (ok), --check that changes nothing, a host whose policy was
# changed meanwhile failing the play on that host only, a rollback run
# restoring the version before; each host's lyhd is asked directly (not
# through Ansible) what is in force after every run.
#
# usage: fleet.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# The namespaces, daemons and sshds are this test's own (lib.sh's cleanup plus
# the hooks below); traffic stays inside 10.79.0.0/24, which exists only in the
# namespaces made here; nothing is started in the host's namespace.
# tests/e2e/relp_send.py is the hostile RELP sender of §6e.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: fleet.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"
for c in ansible-playbook ssh ssh-keygen /usr/sbin/sshd /usr/bin/python3; do
    command -v "$c" >/dev/null 2>&1 || lyh_skip "$c not installed (scripts/deps installs it)"
done

P="lyhf-$$"
T=$LYH_TMP
NET=$P-net ADM=$P-adm COL=$P-col
HOSTS=(h1 h2 h3)
declare -A ADDR=([h1]=10.79.0.1 [h2]=10.79.0.2 [h3]=10.79.0.3)
declare -A NUM=([h1]=1 [h2]=2 [h3]=3)
declare -A DPID=() RPID=()
COL_ADDR=10.79.0.20

# ---- 1. the network: a bridge in NET, each host, the admin and the collector on it; ----
# each host's "VPN" tun0 a veth into NET (10.80.N.0/30), its IPv4 default route
lyh_netns_add "$NET" && lyh_netns_add "$ADM" && lyh_netns_add "$COL" || lyh_die "namespaces"
ip -n "$NET" link add br0 type bridge && ip -n "$NET" link set br0 up || lyh_die "bridge"
# attach NS ADDR PORTNAME: a veth eth0 in NS with ADDR/24, its peer PORTNAME on br0
attach() {
    ip -n "$NET" link add "$3" type veth peer name eth0 netns "$1" &&
        ip -n "$NET" link set "$3" master br0 && ip -n "$NET" link set "$3" up &&
        ip -n "$1" addr add "$2/24" dev eth0 && ip -n "$1" link set eth0 up
}
for h in "${HOSTS[@]}"; do
    n=${NUM[$h]}
    lyh_netns_add "$P-$h" && attach "$P-$h" "${ADDR[$h]}" "p-$h" &&
        ip -n "$P-$h" link add tun0 type veth peer name "t-$h" netns "$NET" &&
        ip -n "$P-$h" addr add "10.80.$n.1/30" dev tun0 && ip -n "$P-$h" link set tun0 up &&
        ip -n "$NET" addr add "10.80.$n.2/30" dev "t-$h" && ip -n "$NET" link set "t-$h" up &&
        ip -n "$P-$h" route add default via "10.80.$n.2" dev tun0 || lyh_die "host $h"
done
attach "$ADM" 10.79.0.10 p-adm || lyh_die "admin namespace"
attach "$COL" "$COL_ADDR" p-col || lyh_die "collector namespace"

# ---- 2. ssh: a key for the admin, a host key and an sshd per host ----------------------
# sshd needs its privilege-separation directory; make it only when missing, and
# remove it at the end then.
RUN_SSHD_MADE=0
if [ ! -d /run/sshd ]; then
    install -d -m 0755 /run/sshd && RUN_SSHD_MADE=1
fi
rm_run_sshd() { [ "$RUN_SSHD_MADE" = 1 ] && rmdir /run/sshd 2>/dev/null; }
lyh_on_cleanup rm_run_sshd
ssh-keygen -q -t ed25519 -N '' -C lyh-fleet-admin -f "$T/admin_key" || lyh_die "admin key"
cp "$T/admin_key.pub" "$T/authorized_keys"
: >"$T/known_hosts"
for h in "${HOSTS[@]}"; do
    mkdir -m 0755 "$T/$h" # its log socket is for everyone, as /dev/log is
    ssh-keygen -q -t ed25519 -N '' -f "$T/$h/host_key" || lyh_die "host key $h"
    echo "${ADDR[$h]} $(cut -d' ' -f1,2 "$T/$h/host_key.pub")" >>"$T/known_hosts"
    cat >"$T/$h/sshd_config" <<EOF
ListenAddress ${ADDR[$h]}
HostKey $T/$h/host_key
PidFile none
AuthorizedKeysFile $T/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
    nsenter --net="/run/netns/$P-$h" /usr/sbin/sshd -D -e -f "$T/$h/sshd_config" \
        </dev/null >/dev/null 2>"$T/$h/sshd.log" &
    lyh_track_pid "$!"
done

# ---- 2b. rsyslog: the collector, and one per host -------------------------------------------
# Both run contrib/rsyslog's files as docs/admin.md gives them, with the
# collector's address and log directory replaced. A host's own part (its log
# socket, the trusted properties lyh-forward.conf needs, a local copy of what
# lyhd sent) is what /etc/rsyslog.conf says on a real host.
[ -x /usr/sbin/rsyslogd ] && ls /usr/lib/*/rsyslog/omrelp.so >/dev/null 2>&1 ||
    lyh_skip "rsyslog with RELP not installed (scripts/deps installs it)"
mkdir -m 0755 "$T/col" "$T/col/work"
sed "s|/var/log/lyh|$T/col/logs|" "$SRC/contrib/rsyslog/lyh-collector.conf" >"$T/col/lyh-collector.conf"
cat >"$T/col/rsyslog.conf" <<EOF
global(workDirectory="$T/col/work" localHostName="collector")
include(file="$T/col/lyh-collector.conf")
EOF
# start_rsyslog NS DIR: rsyslogd -n with DIR/rsyslog.conf in namespace NS
# (tracked); its pid in LAST_RSYSLOG
start_rsyslog() {
    nsenter --net="/run/netns/$1" /usr/sbin/rsyslogd -n -f "$2/rsyslog.conf" -i "$2/rsyslogd.pid" \
        </dev/null >>"$2/rsyslogd.log" 2>&1 &
    LAST_RSYSLOG=$!
    lyh_track_pid "$LAST_RSYSLOG"
}
col_listens() { nsenter --net="/run/netns/$COL" timeout 5 bash -c "echo >/dev/tcp/127.0.0.1/2514"; }
start_rsyslog "$COL" "$T/col"
COL_PID=$LAST_RSYSLOG
for h in "${HOSTS[@]}"; do
    mkdir -m 0755 "$T/$h/rsyslog"
    sed "s|collector.example.net|$COL_ADDR|" "$SRC/contrib/rsyslog/lyh-forward.conf" >"$T/$h/lyh-forward.conf"
    cat >"$T/$h/rsyslog.conf" <<EOF
global(workDirectory="$T/$h/rsyslog" localHostName="$h")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="$T/$h/log.sock" Annotate="on" ParseTrusted="on" RateLimit.Interval="0")
template(name="local-msg" type="string" string="%msg%\n")
if \$programname == "lyhd" and \$syslogfacility-text == "authpriv" then action(type="omfile" file="$T/$h/local.log" template="local-msg")
template(name="daemon-msg" type="string" string="%programname% %syslogseverity-text% %msg%\n")
if \$syslogfacility-text == "daemon" then action(type="omfile" file="$T/$h/daemon.log" template="daemon-msg")
include(file="$T/$h/lyh-forward.conf")
EOF
    start_rsyslog "$P-$h" "$T/$h"
    RPID[$h]=$LAST_RSYSLOG
done
for h in "${HOSTS[@]}"; do
    lyh_wait_until 10 test -S "$T/$h/log.sock" || lyh_die "rsyslog on $h: no socket: $(tail -n 5 "$T/$h/rsyslogd.log")"
done
lyh_wait_until 10 col_listens || lyh_die "the collector's rsyslog does not listen: $(tail -n 5 "$T/col/rsyslogd.log")"
for d in col "${HOSTS[@]}"; do # rsyslogd runs on with a config it could not read: say so
    t_check "rsyslogd ($d) read its configuration without an error" \
        sh -c "! grep -i 'error' '$T/$d/rsyslogd.log'"
done

# ---- 3. a lyhd per host ------------------------------------------------------------------
echo "nameserver 10.80.1.2" >"$T/resolv.conf"
# start_lyhd HOST: lyhd in HOST's namespace and a cgroup of its own; waits
# (20 s) until it answers. Its session subtree is removed before its cgroup.
start_lyhd() {
    local h=$1 dcg=$LYH_CGMNT/$P-$1-d i logopt=()
    # h1's log lines go to its rsyslog too (lyhd --syslog-socket, §6f)
    [ "$h" = h1 ] && logopt=(--syslog-socket "$T/$h/log.sock" --verbose)
    mkdir -p "$T/$h/state" && install -d -m 1777 "$T/$h/tmp" && mkdir "$dcg" || return 1
    _LYH_CGDIRS+=("$dcg" "$dcg/lyh")
    nsenter --net="/run/netns/$P-$h" sh -c 'echo $$ > "$1/cgroup.procs" || exit 99; shift; exec "$@"' \
        sh "$dcg" "$LYH_LYHD" --socket "$T/$h/lyhd.sock" --state-dir "$T/$h/state" \
        --tmp-dir "$T/$h/tmp" --resolv-conf "$T/resolv.conf" --syslog-audit-socket "$T/$h/log.sock" "${logopt[@]}" </dev/null >/dev/null 2>"$T/$h/lyhd.log" &
    DPID[$h]=$!
    lyh_track_pid "$!"
    for ((i = 0; i < 200; i++)); do
        lyh_alive "${DPID[$h]}" || return 1
        "$LYH_LYH" --socket "$T/$h/lyhd.sock" capabilities >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}
for h in "${HOSTS[@]}"; do # one at a time: the first creates lyhd's system user
    start_lyhd "$h" || lyh_die "lyhd on $h does not start: $(tail -n 5 "$T/$h/lyhd.log")"
done
for h in "${HOSTS[@]}"; do
    lyh_wait_until 10 nsenter --net="/run/netns/$ADM" timeout 5 bash -c "echo >/dev/tcp/${ADDR[$h]}/22" ||
        lyh_die "sshd on $h does not answer: $(tail -n 5 "$T/$h/sshd.log")"
done

# ---- 4. the admin's Ansible: inventory, policies, a runner ------------------------------
cat >"$T/hosts" <<EOF
[lyh_hosts]
h1 ansible_host=${ADDR[h1]} lyh_policy_socket=$T/h1/lyhd.sock
h2 ansible_host=${ADDR[h2]} lyh_policy_socket=$T/h2/lyhd.sock
h3 ansible_host=${ADDR[h3]} lyh_policy_socket=$T/h3/lyhd.sock

[lyh_hosts:vars]
ansible_user=root
ansible_python_interpreter=/usr/bin/python3
ansible_ssh_private_key_file=$T/admin_key
ansible_ssh_common_args=-o UserKnownHostsFile=$T/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes
lyh_policy_lyh=$LYH_LYH
EOF
cat >"$T/p1.toml" <<'EOF'
allowed_interface_patterns = ["wg*", "tun*"]
always_deny = ["203.0.113.0/24"]
max_sessions_per_uid = 8
EOF
cat >"$T/p2.toml" <<'EOF'
allowed_interface_patterns = ["wg*"]
always_deny = ["203.0.113.0/24", "198.51.100.0/24"]
max_sessions_per_uid = 4
EOF
cat >"$T/local.toml" <<'EOF'
always_deny = ["192.0.2.0/24"]
EOF
mkdir -m 0700 "$T/ansible" "$T/ansible/tmp" "$T/ansible/cp"
# play NAME ARGS...: ansible-playbook contrib/ansible/site.yml from the admin
# namespace, bounded; output in $T/NAME.out, exit status in $T/NAME.rc. The environment keeps Ansible's files inside $T.
play() {
    local name=$1
    shift
    (cd "$T" && timeout -k 5 240 nsenter --net="/run/netns/$ADM" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        HOME="$T/ansible" LANG=C.UTF-8 ANSIBLE_HOME="$T/ansible" ANSIBLE_LOCAL_TEMP="$T/ansible/tmp" \
        ANSIBLE_REMOTE_TMP="$T/ansible/tmp" ANSIBLE_SSH_CONTROL_PATH_DIR="$T/ansible/cp" \
        ANSIBLE_STDOUT_CALLBACK=default ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0 \
        ANSIBLE_HOST_KEY_CHECKING=1 ANSIBLE_TIMEOUT=30 \
        ansible-playbook -i "$T/hosts" "$SRC/contrib/ansible/site.yml" "$@" >"$T/$name.out" 2>"$T/$name.err")
    echo $? >"$T/$name.rc"
}
# stat NAME HOST KEY: a figure of Ansible's PLAY RECAP line for HOST (ok,
# changed, failed, unreachable)
stat() {
    sed -n "s/^$2 *: .*\<$3=\([0-9]*\).*/\1/p" "$T/$1.out" | grep . || echo "?"
}
# msg NAME HOST: the message of HOST's failed task (Ansible's "fatal" line)
msg() {
    sed -n "s/^fatal: \[$2\]: FAILED! => //p" "$T/$1.out" |
        /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read()).get("msg", ""))' 2>/dev/null
}
version() { # HOST: the version in force, from that host's lyhd
    "$LYH_LYH" --socket "$T/$1/lyhd.sock" policy get --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])'
}
in_force() { # HOST FILE: is FILE's content the policy in force (a diff finds no change)?
    "$LYH_LYH" --socket "$T/$1/lyhd.sock" policy diff "$2" --json | grep -q '"changed":false'
}
show_play() { # NAME: Ansible's output, indented, when a check of it failed
    tail -n 40 "$T/$1.out" "$T/$1.err" | sed 's/^/  | /'
}
recap() { # NAME LABEL RC CHANGED FAILURES: the run's exit status and each host's figures
    local name=$1 label=$2 h bad=0
    t_eq "$label: ansible-playbook exit status" "$(cat "$T/$name.rc")" "$3" || bad=1
    for h in "${HOSTS[@]}"; do
        t_eq "$label: $h changed" "$(stat "$name" "$h" changed)" "$4" || bad=1
        t_eq "$label: $h failures" "$(stat "$name" "$h" failed)" "$5" || bad=1
    done
    [ "$bad" = 0 ] || show_play "$name"
}

# ---- 5. the runs ---------------------------------------------------------------------------
echo "# 5a. --check --diff: says what would change, changes nothing"
play check -e "lyh_policy_file=$T/p1.toml" --check --diff
recap check "check" 0 1 0
for h in "${HOSTS[@]}"; do t_eq "check: $h still at version 0" "$(version "$h")" 0; done
t_check "check: --diff shows lyhd's lines that would go and come" \
    grep -qxF '+ always_deny = ["203.0.113.0/24"]' "$T/check.out"
t_check "check: ... and those that would go" grep -qxF -e '- always_deny = []' "$T/check.out"

echo "# 5b. apply p1: changed on every host"
play apply1 -e "lyh_policy_file=$T/p1.toml"
recap apply1 "apply" 0 1 0
for h in "${HOSTS[@]}"; do
    t_eq "apply: $h at version 1" "$(version "$h")" 1
    t_check "apply: $h has p1 in force" in_force "$h" "$T/p1.toml"
done

echo "# 5c. apply p1 again: nothing changes (ok), no new version"
play apply2 -e "lyh_policy_file=$T/p1.toml"
recap apply2 "again" 0 0 0
for h in "${HOSTS[@]}"; do t_eq "again: $h still at version 1" "$(version "$h")" 1; done
t_check "again: the role says it was in force already" \
    grep -q 'policy version 1 already in force; nothing changed' "$T/apply2.out"

echo "# 5d. h2 is changed on the host; p2 expecting version 1 fails there only"
"$LYH_LYH" --socket "$T/h2/lyhd.sock" policy set "$T/local.toml" >/dev/null || t_fail "local change on h2" "refused"
t_eq "local change: h2 at version 2" "$(version h2)" 2
play apply3 -e "lyh_policy_file=$T/p2.toml" -e lyh_policy_expect_version=1
t_eq "expect: ansible-playbook exit status (a host failed)" "$(cat "$T/apply3.rc")" 2
for h in h1 h3; do
    t_eq "expect: $h changed" "$(stat apply3 "$h" changed)" 1
    t_eq "expect: $h failures" "$(stat apply3 "$h" failed)" 0
    t_eq "expect: $h at version 2" "$(version "$h")" 2
    t_check "expect: $h has p2 in force" in_force "$h" "$T/p2.toml"
done
t_eq "expect: h2 failed" "$(stat apply3 h2 failed)" 1
t_eq "expect: h2 changed nothing" "$(stat apply3 h2 changed)" 0
t_check "expect: h2's failure names the version in force and the one expected" \
    grep -q 'is version 2, not the expected 1: it was changed on this host since' <<<"$(msg apply3 h2)"
t_eq "expect: h2 still at its own version 2" "$(version h2)" 2
t_check "expect: h2 keeps the host's own change" in_force h2 "$T/local.toml"

echo "# 5e. roll h1 and h3 back: p1 again, as a new version"
play rollback -e lyh_policy_state=rollback --limit h1,h3
t_eq "rollback: ansible-playbook exit status" "$(cat "$T/rollback.rc")" 0
for h in h1 h3; do
    t_eq "rollback: $h changed" "$(stat rollback "$h" changed)" 1
    t_eq "rollback: $h at version 3" "$(version "$h")" 3
    t_check "rollback: $h has p1 in force again" in_force "$h" "$T/p1.toml"
done
t_eq "rollback: h2 untouched" "$(version h2)" 2
t_check "rollback: audit on h1 names the rollback and the process that asked (lyh, run over ssh)" sh -c \
    "'$LYH_LYH' --socket '$T/h1/lyhd.sock' audit query --kind policy --json | grep '\"action\":\"rollback\"' | grep -q 'by_proc=lyh'"
[ "$(cat "$T/rollback.rc")" = 0 ] || show_play rollback

# ---- 6. audit records at the collector ------------------------------------------------------
lyh_user_create || lyh_die "cannot create the test user"
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0755 "$LYH_HOME/project"
# as_user HOST CMD...: CMD as the test user in HOST's namespace, bounded
as_user() {
    local h=$1
    shift
    (cd "$LYH_HOME/project" && exec timeout -k 5 60 nsenter --net="/run/netns/$P-$h" \
        setpriv --reuid="$LYH_UID" --regid="$LYH_GID" --init-groups \
        env -i HOME="$LYH_HOME" USER="$LYH_USER" LOGNAME="$LYH_USER" PATH=/usr/bin:/bin LANG=C "$@")
}
sessions() { # HOST N: N sessions of /bin/true through tun0, as the test user
    local i
    for ((i = 0; i < $2; i++)); do
        as_user "$1" "$LYH_LYH" --socket "$T/$1/lyhd.sock" run --vpn tun0 --quiet -- /bin/true \
            </dev/null >>"$T/sessions.log" 2>&1 || return 1
    done
}
db_ids() { # HOST: the ids of every record in HOST's audit.db
    sqlite3 -readonly -cmd '.timeout 5000' "$T/$1/state/audit.db" 'select id from events order by id'
}
col_ids() { # HOST: the ids of the elements the collector wrote for HOST (repeats kept)
    sed -n 's/^\[lyh@32473 id="\([0-9]*\)".*/\1/p' "$T/col/logs/${ADDR[$1]}.log" 2>/dev/null | sort -n
}
all_arrived() { # HOST: the collector has each record of HOST's audit.db (and no other)
    [ -n "$(db_ids "$1")" ] && [ "$(db_ids "$1")" = "$(col_ids "$1" | uniq)" ]
}
taken() { # HOST: HOST's rsyslog took each of lyhd's records (its local copy has them all)
    [ "$(db_ids "$1" | wc -l)" = "$(grep -c '^ *\[lyh@32473 id=' "$T/$1/local.log" 2>/dev/null)" ]
}
lines() { # FILE: its lines without leading blanks, sorted
    sed 's/^ *//' "$1" 2>/dev/null | sort
}

echo "# 6a. every record of every host arrives at the collector, as lyhd wrote it"
for h in "${HOSTS[@]}"; do sessions "$h" 2 || t_fail "6a: sessions on $h" "$(tail -n 3 "$T/sessions.log")"; done
for h in "${HOSTS[@]}"; do
    lyh_wait_until 30 all_arrived "$h" ||
        sqlite3 -readonly -cmd '.timeout 5000' "$T/$h/state/audit.db" \
            'select id, kind, verdict, action, session, time_us from events order by id' | sed "s/^/    $h audit.db: /"
    t_eq "6a: $h: the collector has each record of audit.db once (ids)" \
        "$(col_ids "$h" | tr '\n' ' ')" "$(db_ids "$h" | tr '\n' ' ')"
    t_eq "6a: $h: each element byte for byte as the host's syslog got it from lyhd" \
        "$(lines "$T/col/logs/${ADDR[$h]}.log" | md5sum)" "$(lines "$T/$h/local.log" | md5sum)"
done
t_check "6a: h1's session start is there with its fields" \
    grep -qE '^\[lyh@32473 id="[0-9]+" time="[^"]+" kind="session" action="start" session="[0-9a-f]{16}" uid="'"$LYH_UID"'"' \
    "$T/col/logs/${ADDR[h1]}.log"

echo "# 6b. the collector down for a while: sessions, a policy change; nothing lost"
lyh_stop_pid "$COL_PID" 10
lyh_wait_until 5 sh -c "! nsenter --net=/run/netns/$COL timeout 2 bash -c 'echo >/dev/tcp/127.0.0.1/2514'" 2>/dev/null
declare -A BEFORE=()
for h in "${HOSTS[@]}"; do BEFORE[$h]=$(wc -l <"$T/col/logs/${ADDR[$h]}.log"); done
for h in "${HOSTS[@]}"; do sessions "$h" 3 || t_fail "6b: sessions on $h" "$(tail -n 3 "$T/sessions.log")"; done
printf '%s\nextra_env_block = ["AWS_*"]\n' "$(cat "$T/p1.toml")" >"$T/p3.toml"
"$LYH_LYH" --socket "$T/h1/lyhd.sock" policy set "$T/p3.toml" >/dev/null || t_fail "6b: a policy change on h1" "refused"
for h in "${HOSTS[@]}"; do
    t_check "6b: $h's rsyslog took every record while the collector is down" lyh_wait_until 10 taken "$h"
done
for h in "${HOSTS[@]}"; do
    t_eq "6b: $h: nothing reached the collector while it was down" "$(wc -l <"$T/col/logs/${ADDR[$h]}.log")" "${BEFORE[$h]}"
done
start_rsyslog "$COL" "$T/col"
COL_PID=$LAST_RSYSLOG
for h in "${HOSTS[@]}"; do
    lyh_wait_until 60 all_arrived "$h"
    t_eq "6b: $h: after the collector came back it has every record, once" \
        "$(col_ids "$h" | tr '\n' ' ')" "$(db_ids "$h" | tr '\n' ' ')"
    t_eq "6b: $h: byte for byte" "$(lines "$T/col/logs/${ADDR[$h]}.log" | md5sum)" "$(lines "$T/$h/local.log" | md5sum)"
done
t_check "6b: the policy change on h1 is among them" grep -q 'kind="policy" action="set"' "$T/col/logs/${ADDR[h1]}.log"

echo "# 6c. h1's own rsyslog down (restarting): lyhd keeps its records and sends them when it is back"
lyh_stop_pid "${RPID[h1]}" 10
sessions h1 2 || t_fail "6c: sessions on h1 while its rsyslog is down" "$(tail -n 3 "$T/sessions.log")"
t_check "6c: lyhd's log says the socket is gone and that records wait" \
    lyh_wait_until 5 grep -q "syslog: cannot reach $T/h1/log.sock" "$T/h1/lyhd.log"
t_check "6c: lyhd runs on meanwhile" "$LYH_LYH" --socket "$T/h1/lyhd.sock" status
start_rsyslog "$P-h1" "$T/h1"
RPID[h1]=$LAST_RSYSLOG
t_check "6c: lyhd sent what waited once h1's rsyslog was back" lyh_wait_until 15 taken h1
t_check "6c: ... and says so" grep -q "syslog: $T/h1/log.sock reached again" "$T/h1/lyhd.log"
lyh_wait_until 30 all_arrived h1
t_eq "6c: h1: the collector has every record, once" "$(col_ids h1 | tr '\n' ' ')" "$(db_ids h1 | tr '\n' ' ')"

echo "# 6d. a local user writes a forged lyhd record into h1's log socket: not forwarded"
as_user h1 logger -u "$T/h1/log.sock" -d -t lyhd -p authpriv.warning \
    '[lyh@32473 id="999999" kind="flow" verdict="allowed"]' || t_fail "6d: logger" "failed"
sessions h1 1 || t_fail "6d: a session after it" "$(tail -n 3 "$T/sessions.log")"
lyh_wait_until 30 all_arrived h1
t_check "6d: h1's rsyslog got the forgery (the check below is not vacuous)" grep -q 'id="999999"' "$T/h1/local.log"
t_check "6d: the records after it arrived" all_arrived h1
t_check "6d: the forgery did not reach the collector" sh -c "! grep -q 'id=\"999999\"' '$T/col/logs/${ADDR[h1]}.log'"

echo "# 6f. h1's lyhd also logs to its rsyslog (--syslog-socket): nothing of that leaves the host"
t_check "6f: lyhd's lines reach h1's syslog (facility daemon, tag lyhd)" grep -q '^lyhd info  *[a-z]' "$T/h1/daemon.log"
t_check "6f: ... and the protocol process's, sent after it confined itself" \
    grep -q '^lyhd-protocol debug  *protocol process [0-9]* confined and ready' "$T/h1/daemon.log"
t_check "6f: the lines lyhd could not send while its syslog was down (6c) are counted" \
    grep -q '^lyhd warning  *[0-9]* earlier log line(s) were not sent to syslog' "$T/h1/daemon.log"
t_check "6f: the collector has audit records only" sh -c "! grep -qv '^\[lyh@32473 ' '$T/col/logs/${ADDR[h1]}.log'"

echo "# 6e. a hostile sender on the network claims to be h1, then names a path as its hostname"
ROGUE=10.79.0.10 # the admin namespace's address, where it sends from
rogue() { # HOSTNAME ELEMENT: one RELP message to the collector, from the admin namespace
    nsenter --net="/run/netns/$ADM" timeout -k 2 20 /usr/bin/python3 "$HERE/relp_send.py" \
        "$COL_ADDR" 2514 "$1" "$2"
}
rogue_got() { [ "$(grep -c '^\[lyh@32473 id="77777[12]"' "$T/col/logs/$ROGUE.log" 2>/dev/null)" = 2 ]; }
t_check "6e: the collector acknowledged a record from 'h1'" \
    rogue h1 '[lyh@32473 id="777771" kind="flow" verdict="allowed"]'
t_check "6e: ... and one from '../../rogue'" \
    rogue ../../rogue '[lyh@32473 id="777772" kind="flow" verdict="allowed"]'
t_check "6e: both are in the file of the address they came from (the checks below are not vacuous)" \
    lyh_wait_until 10 rogue_got
t_eq "6e: h1's file still has h1's records only" "$(col_ids h1 | tr '\n' ' ')" "$(db_ids h1 | tr '\n' ' ')"
t_eq "6e: the collector wrote one file per sending address, nothing else" \
    "$(cd "$T/col/logs" && find . | sort | tr '\n' ' ')" \
    "$(printf '%s\n' . "./$ROGUE.log" "./${ADDR[h1]}.log" "./${ADDR[h2]}.log" "./${ADDR[h3]}.log" | sort | tr '\n' ' ')"
t_check "6e: nothing named after the hostname anywhere" sh -c "[ -z \"\$(find '$T' -name 'rogue*')\" ]"

for h in "${HOSTS[@]}"; do
    lyh_stop_pid "${DPID[$h]}" 15
    lyh_sanitizer_report "$T/$h/lyhd.log" >/dev/null && t_fail "$h: no sanitizer report" "$T/$h/lyhd.log"
done
t_done
exit $?

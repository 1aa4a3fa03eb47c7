#!/usr/bin/python3
# -*- coding: utf-8 -*-
# lyh_policy: put a lyhd admin policy in force on a host, through the host's own
# `lyh policy` commands (the daemon validates and versions every change; this
# module only decides which command to run and reports what it did).
#
# Part of LianYaoHu's contrib/ansible (docs/admin.md, "Many hosts: Ansible").

DOCUMENTATION = r"""
module: lyh_policy
short_description: Put a LianYaoHu (lyhd) admin policy in force
description:
  - Reads the host's policy with C(lyh policy get --json), then sets the desired TOML with
    C(lyh policy set --expect-version V) (V = the version just read, so a change made by
    someone else in between is never overwritten), or rolls back.
  - Content identical to the policy in force changes nothing and reports ok (lyhd makes no
    new version).
  - Check mode asks lyhd with C(lyh policy diff) / C(rollback --dry-run): nothing changes.
  - Diff mode shows the lines of C(lyh policy get --toml) the change removes and adds, as
    C(lyh policy diff) computes them (the file is compared as lyhd reads it, defaults included).
options:
  content:
    description: The policy as TOML (a file for C(lyh policy set)). Required when I(state=present).
    type: str
  state:
    description: C(present) sets I(content); C(rollback) restores I(rollback_to).
    type: str
    choices: [present, rollback]
    default: present
  rollback_to:
    description: C(previous) (the version before the one in force), C(default) (the built-in
      policy) or a version number. Only with I(state=rollback).
    type: str
    default: previous
  expect_version:
    description: Fail, changing nothing, unless this is the version in force (the version an
      earlier run left, so that a change made on the host meanwhile stops the play there).
    type: int
  socket:
    description: lyhd's socket (C(lyh --socket)); default lyh's own default.
    type: path
  lyh:
    description: The lyh command.
    type: path
    default: lyh
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule


def lyh_cmd(module, *args):
    p = module.params
    cmd = [p["lyh"]]
    if p["socket"]:
        cmd += ["--socket", p["socket"]]
    return cmd + list(args)


def run(module, *args, data=None):
    rc, out, err = module.run_command(lyh_cmd(module, *args), data=data, binary_data=True)
    return rc, out, err


def run_json(module, what, *args, data=None):
    rc, out, err = run(module, *args, data=data)
    if rc != 0:
        module.fail_json(msg="%s failed (exit %d): %s" % (what, rc, (err or out).strip()),
                         rc=rc, stderr=err, stdout=out)
    try:
        return json.loads(out)
    except ValueError:
        module.fail_json(msg="%s printed no JSON: %r" % (what, out[:200]))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            content=dict(type="str"),
            state=dict(type="str", choices=["present", "rollback"], default="present"),
            rollback_to=dict(type="str", default="previous"),
            expect_version=dict(type="int"),
            socket=dict(type="path"),
            lyh=dict(type="path", default="lyh"),
        ),
        required_if=[("state", "present", ["content"])],
        supports_check_mode=True,
    )
    p = module.params

    now = run_json(module, "lyh policy get --json", "policy", "get", "--json")
    version = int(now["version"])
    if p["expect_version"] is not None and version != p["expect_version"]:
        module.fail_json(
            msg="the policy in force is version %d, not the expected %d: it was changed on this "
            "host since (lyh policy history shows by whom); nothing changed"
            % (version, p["expect_version"]),
            version=version)

    result = dict(changed=False, previous_version=version, version=version)
    if p["state"] == "present":
        fd, path = tempfile.mkstemp(prefix="lyh-policy.", suffix=".toml")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(p["content"])
            if module.check_mode or module._diff:
                r = run_json(module, "lyh policy diff", "policy", "diff", path, "--json")
                result.update(changed=bool(r["changed"]), effects=r.get("effects", []))
                if module._diff and r["changed"]:
                    lines = ["- " + x for x in r.get("removed", [])] + \
                        ["+ " + x for x in r.get("added", [])]
                    result["diff"] = dict(prepared="version %d -> desired\n%s" %
                                          (version, "\n".join(lines)))
            if not module.check_mode:
                r = run_json(module, "lyh policy set", "policy", "set", path,
                             "--expect-version", str(version), "--json")
                result.update(changed=bool(r["changed"]), version=int(r["version"]))
        finally:
            os.unlink(path)
    else:
        to = p["rollback_to"]
        if to == "previous":
            if version == 0:
                module.fail_json(msg="no version before 0 (the built-in policy) to roll back to")
            to = str(version - 1)
        elif to != "default" and not to.isdigit():
            module.fail_json(msg="rollback_to must be previous, default or a version number, "
                             "not %r" % to)
        args = ["policy", "rollback", to, "--expect-version", str(version), "--json"]
        if module.check_mode:
            args.append("--dry-run")
        r = run_json(module, "lyh policy rollback", *args)
        result.update(changed=bool(r["changed"]), rollback_to=to)
        if not module.check_mode:
            result["version"] = int(r["version"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: MIT
# Part of fixpoint's conformance harness (tests/conformance/main.rs), written for it.
"""A stdout callback for ansible-playbook that prints one JSON object per line:
each task result (and each loop item) with its host, task name, status and result,
then the recap. The harness compares these lines with `fixpoint --format json -v`."""

from __future__ import annotations

import json
import sys

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: fixpoint_events
    type: stdout
    short_description: task results as JSON lines, for fixpoint's conformance harness
    description:
        - One JSON object per task result, loop item and recap, on stdout.
"""


def _public(result):
    # Keys starting with _ansible are Ansible's internal bookkeeping, not the module's result.
    return {k: v for k, v in result.items() if not k.startswith("_ansible")}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "fixpoint_events"

    def _emit(self, obj):
        # default=repr: a value the module returned that JSON cannot carry still shows up.
        sys.stdout.write(json.dumps(obj, sort_keys=True, default=repr) + "\n")
        sys.stdout.flush()

    def _event(self, kind, result, status, ignored=False):
        data = result.result
        ev = {
            "event": kind,
            "host": result.host.get_name(),
            "task": result.task.get_name().strip(),
            "action": result.task.action,
            "status": status,
            "msg": data.get("msg"),
            "result": _public(data),
        }
        if ignored:
            ev["ignored"] = True
        if kind == "item":
            # The label is what Ansible shows for the item (loop_control.label or the item).
            ev["item"] = data.get("_ansible_item_label", data.get("item"))
        self._emit(ev)

    def _ok_status(self, result):
        return "changed" if result.result.get("changed", False) else "ok"

    def v2_runner_on_ok(self, result):
        self._event("task", result, self._ok_status(result))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._event("task", result, "failed", ignored=ignore_errors)

    def v2_runner_on_skipped(self, result):
        self._event("task", result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._event("task", result, "unreachable")

    def v2_runner_item_on_ok(self, result):
        self._event("item", result, self._ok_status(result))

    def v2_runner_item_on_failed(self, result):
        self._event("item", result, "failed")

    def v2_runner_item_on_skipped(self, result):
        self._event("item", result, "skipped")

    def v2_playbook_on_stats(self, stats):
        hosts = {}
        for host in sorted(stats.processed.keys()):
            s = stats.summarize(host)
            # fixpoint's recap calls Ansible's `failures` `failed`.
            s["failed"] = s.pop("failures")
            hosts[host] = s
        self._emit({"event": "recap", "hosts": hosts})

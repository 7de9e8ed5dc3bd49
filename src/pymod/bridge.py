"""fixpoint's bridge to the playbook's own Jinja plugins.

Run by the controller (src/pymod/bridge.rs) with the Python of the user's Ansible installation.
It answers one JSON request per line on stdin with one JSON reply per line on the protocol
stream (a copy of the original stdout; a plugin's own prints go to stderr). The plugins are
found and called through ansible-core's own plugin loaders, so a plugin behaves as it does
under ansible-playbook; this file only carries values across.

Requests:
  {"op": "init", "dirs": [...], "collections": [...]}      -> {"filter": [...], "test": [...]}
  {"op": "has", "kind": "filter"|"test"|"lookup", "name": n}  -> {"ok": bool}
  {"op": "filter"|"test", "name": n, "args": [...], "kwargs": {...}}  -> {"ok": value}
  {"op": "lookup", "name": n, "terms": [...], "kwargs": {...}, "keys": [...], "basedir": d}
      -> {"ok": [values]}; while it runs the bridge may ask {"var": name} and reads
         {"value": v} or {"missing": true}
Any failure -> {"error": message, "why": "run" | "load" | "missing" | "undefined"}.

An undefined lookup term travels as {"__fp_undefined": null}: a lookup declaring
`accept_args_markers` gets ansible-core's undefined marker in its place, any other is refused
("undefined"), as the controller fails such a call; a marker a plugin returns goes back as the
same mapping.
"""

import collections.abc
import json
import os
import sys

PROTO = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr

LOCAL_DIRS = []


def send(obj):
    PROTO.write(json.dumps(obj, default=plain) + "\n")
    PROTO.flush()


UNDEFINED_KEY = "__fp_undefined"


def is_undefined(value):
    return isinstance(value, dict) and len(value) == 1 and UNDEFINED_KEY in value


def plain(value):
    """What JSON cannot carry as it is: sets and other iterables become lists, undefined values
    (ansible-core's markers are Jinja's Undefined) the undefined mapping, the rest text."""
    import jinja2

    if isinstance(value, jinja2.Undefined):
        return {UNDEFINED_KEY: None}
    if isinstance(value, collections.abc.Mapping):
        return dict(value)
    if isinstance(value, (collections.abc.Set, tuple, collections.abc.Sequence)):
        return list(value)
    return str(value)


class Vars(collections.abc.Mapping):
    """The task's variables, each fetched from the controller when the plugin reads it."""

    def __init__(self, keys):
        self._keys = keys
        self._got = {}

    def __getitem__(self, name):
        if name not in self._got:
            send({"var": name})
            reply = json.loads(sys.stdin.readline())
            if reply.get("missing"):
                raise KeyError(name)
            self._got[name] = reply["value"]
        return self._got[name]

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)


def local_names(loader):
    """The filters or tests of the playbook's and roles' own plugin directories."""
    loader._ensure_non_collection_wrappers()
    names = []
    for name, wrapper in loader._cached_non_collection_wrappers.items():
        path = getattr(wrapper, "_original_path", "") or ""
        if "." not in name and any(path.startswith(d + os.sep) for d in LOCAL_DIRS):
            names.append(name)
    return sorted(names)


def init(req):
    from ansible.plugins import loader as plugin_loader

    plugin_loader.init_plugin_loader(req["collections"])
    for d in req["dirs"]:
        plugin_loader.add_all_plugin_dirs(d)
        for sub in ("filter_plugins", "test_plugins", "lookup_plugins"):
            LOCAL_DIRS.append(os.path.join(os.path.realpath(d), sub))
            LOCAL_DIRS.append(os.path.join(d, sub))
    return {
        "filter": local_names(plugin_loader.filter_loader),
        "test": local_names(plugin_loader.test_loader),
    }


class Failure(Exception):
    """A plugin that is not there ("missing"), cannot be loaded ("load") or is given an undefined
    value it does not take ("undefined")."""

    def __init__(self, why, text=""):
        super().__init__(text)
        self.why = why


def get(kind, name, **kwargs):
    from ansible.plugins import loader as plugin_loader

    try:
        found = getattr(plugin_loader, kind + "_loader").get(name, **kwargs)
    except KeyError:
        found = None
    except Exception as ex:
        raise Failure("load", message(ex)) from ex
    if found is None:
        raise Failure("missing")
    return found


def has(kind, name):
    """Whether the plugin exists (one that fails to load exists: using it fails)."""
    try:
        get(kind, name)
    except Failure as ex:
        return ex.why == "load"
    return True


def jinja(req):
    plugin = get(req["op"], req["name"])
    # A plugin that failed to load is kept as a stand-in that raises when it is used.
    func = getattr(plugin, "j2_function", None)
    if func is None:
        raise Failure("load")
    value = func(*req["args"], **req["kwargs"])
    return bool(value) if req["op"] == "test" else value


def lookup(req):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    data_loader = DataLoader()
    data_loader.set_basedir(req["basedir"])
    plugin = get("lookup", req["name"], loader=data_loader, templar=Templar(loader=data_loader))
    terms = req["terms"]
    if any(is_undefined(t) for t in terms):
        if not getattr(plugin, "accept_args_markers", False):
            raise Failure("undefined")
        # The marker ansible-core's templating would have passed; made outside a template, so
        # it names no template source.
        from ansible.template import AnsibleUndefined

        terms = [AnsibleUndefined(_no_template_source=True) if is_undefined(t) else t for t in terms]
    values = plugin.run(terms, variables=Vars(req["keys"]), **req["kwargs"])
    if not isinstance(values, collections.abc.Sequence) or isinstance(values, str):
        raise TypeError("returned %s instead of %s" % (type(values), list))
    return list(values)


def message(ex):
    text = str(ex)
    cause = ex.__cause__ or ex.__context__
    if not text and cause is not None:
        text = str(cause)
    return text


def main():
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        try:
            if op == "init":
                send(init(req))
                continue
            if op == "has":
                send({"ok": has(req["kind"], req["name"])})
                continue
            send({"ok": (lookup if op == "lookup" else jinja)(req)})
        except Failure as ex:
            send({"error": str(ex), "why": ex.why})
        except Exception as ex:  # the plugin's failure is the task's, never the bridge's
            send({"error": message(ex) or type(ex).__name__, "why": "run"})


if __name__ == "__main__":
    main()

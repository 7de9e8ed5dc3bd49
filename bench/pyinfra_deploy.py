# The reference workload of bench/site.yml written for pyinfra 3, so that bench/run.sh can time
# pyinfra on the same hosts in the same run: the same files, templates, modes, edits, guarded
# commands and checks, task for task, under each host's `base` (host data from the inventory).
#
# Where pyinfra has no equivalent the nearest idiomatic form is used, and says so:
# - `copy force: false` and `creates:` guards are decided from facts (pyinfra reads them before it
#   runs anything), `removes:` likewise;
# - lineinfile's `insertbefore`/`insertafter` has no counterpart in `files.line`: new lines are
#   appended (the files converge all the same);
# - `stat` + `assert` and the read-only `command` become one `server.shell` test each: pyinfra
#   runs them on every run (as Ansible does) and counts them as changed, so the converged run's
#   "changed" count is the 4 checks, never a file;
# - handlers are operations gated on `_if=any_changed(...)` of the tasks that notify them;
# - the deployment record's checksums are computed here from the same sources (the code file as
#   shipped, the main configuration as rendered), because pyinfra decides content before it runs.
import hashlib
import io
import json
import os

import jinja2
from pyinfra import host
from pyinfra.facts.files import Directory, File
from pyinfra.operations import files, server
from pyinfra.operations.util import any_changed

BENCH = os.environ["FP_BENCH_DIR"]
base = host.data.base
app = "shop"
app_version = "2.4.1"
v = dict(
    app=app,
    app_version=app_version,
    listen_port=8080,
    workers=4,
    log_level="info",
    log_retention_days=14,
    features=["metrics", "tracing", "rate_limit"],
    upstreams=[{"name": "api", "port": 9001}, {"name": "search", "port": 9002}, {"name": "media", "port": 9003}],
    base=base,
    inventory_hostname=host.name,
)
root = f"{base}/srv/{app}"
release_dir = f"{root}/releases/{app_version}"
v.update(root=root, release_dir=release_dir)


def src(name):
    return os.path.join(BENCH, "files", name)


def tpl(name):
    return os.path.join(BENCH, "templates", name)


def content(text):
    return io.StringIO(text)


def missing(path):
    return not host.get_fact(File, path=path)


# ---- directory layout ---------------------------------------------------------------------------
for path, mode in [
    (base, "755"),
    (f"{base}/etc", "755"),
    (f"{base}/etc/conf.d", "755"),
    (f"{base}/etc/proxy", "755"),
    (f"{base}/etc/proxy/sites", "755"),
    (f"{base}/etc/proxy/sites-enabled", "755"),
    (f"{base}/etc/units", "755"),
    (release_dir, "755"),
    (f"{release_dir}/static", "755"),
    (f"{root}/shared", "755"),
    (f"{base}/var/log/{app}", "750"),
    (f"{base}/var/lib/{app}", "700"),
    (f"{base}/run", "755"),
    (f"{base}/secrets", "700"),
    (f"{base}/bin", "755"),
    (f"{base}/backups", "750"),
] + [(f"{base}/var/cache/{app}/{item}", "750") for item in ["http", "images", "sessions"]]:
    files.directory(name=f"directory {path}", path=path, mode=mode)

# ---- static files -------------------------------------------------------------------------------
proxy = []
shop = []
proxy.append(files.put(name="MIME types", src=src("mime.types"), dest=f"{base}/etc/proxy/mime.types", mode="644"))
proxy.append(files.put(name="Security headers", src=src("security-headers.conf"), dest=f"{base}/etc/proxy/security-headers.conf", mode="644"))
shop.append(files.put(name="Logging configuration", src=src("logging.yml"), dest=f"{base}/etc/logging.yml", mode="644"))
files.put(name="Health check script", src=src("healthcheck.sh"), dest=f"{base}/bin/healthcheck.sh", mode="755")
files.put(name="Log rotation script", src=src("rotate-logs.sh"), dest=f"{base}/bin/rotate-logs.sh", mode="755")
shop.append(files.put(name="Application code", src=src("app.py"), dest=f"{release_dir}/app.py", mode="644"))
files.put(name="Requirements", src=src("requirements.txt"), dest=f"{release_dir}/requirements.txt", mode="644")
files.put(name="robots.txt", src=src("robots.txt"), dest=f"{release_dir}/static/robots.txt", mode="644")
if missing(f"{base}/etc/worker.ini"):
    files.put(name="Vendor worker defaults", src=src("worker.ini"), dest=f"{base}/etc/worker.ini", mode="644")

# ---- inline content -----------------------------------------------------------------------------
files.put(name="Release version file", src=content(f"{app_version}\n"), dest=f"{release_dir}/VERSION", mode="644")
files.put(
    name="Base environment drop-in",
    src=content(f"# managed: base environment of {app}\nTZ=UTC\nLANG=C.UTF-8\n"),
    dest=f"{base}/etc/conf.d/00-base.env",
    mode="644",
)
files.put(
    name="Secrets README",
    src=content("Files here are generated on the host and never leave it.\n"),
    dest=f"{base}/secrets/README",
    mode="600",
)
files.put(
    name="Maintenance page",
    src=content(
        f"<!doctype html>\n<title>{app} maintenance</title>\n<p>{app} is being updated and will be back in a minute.</p>\n"
    ),
    dest=f"{root}/shared/maintenance.html",
    mode="644",
)
files.put(
    name="Runtime directory README",
    src=content(f"Runtime files of {app}: pid files, sockets, restart requests.\n"),
    dest=f"{base}/run/README",
    mode="644",
)
files.put(
    name="Periodic jobs",
    src=content(
        f"# m h dom mon dow command\n17 * * * * {base}/bin/rotate-logs.sh {base}/var/log/{app}\n*/5 * * * * {base}/bin/healthcheck.sh\n"
    ),
    dest=f"{base}/etc/cron.shop",
    mode="644",
)
proxy.append(
    files.put(
        name="Allowed client networks",
        src=content("127.0.0.0/8\n10.0.0.0/8\n192.168.0.0/16\n"),
        dest=f"{base}/etc/proxy/allow.list",
        mode="644",
    )
)
files.put(
    name="Feature flags",
    src=content(json.dumps(v["features"], indent=4) + "\n"),
    dest=f"{base}/etc/features.json",
    mode="644",
)

# ---- templates ----------------------------------------------------------------------------------
shop.append(files.template(name="Main configuration", src=tpl("shop.conf.j2"), dest=f"{base}/etc/shop.conf", mode="640", **v))
proxy.append(files.template(name="Proxy site", src=tpl("proxy-site.conf.j2"), dest=f"{base}/etc/proxy/sites/{app}.conf", mode="644", **v))
proxy.append(files.template(name="Proxy upstreams", src=tpl("upstreams.conf.j2"), dest=f"{base}/etc/proxy/upstreams.conf", mode="644", **v))
shop.append(files.template(name="API unit", src=tpl("unit.service.j2"), dest=f"{base}/etc/units/{app}-api.service", mode="644", unit_name="api", **v))
shop.append(
    files.template(name="Worker unit", src=tpl("unit.service.j2"), dest=f"{base}/etc/units/{app}-worker.service", mode="644", unit_name="worker", unit_nice=5, **v)
)
files.template(name="Scheduler unit", src=tpl("unit.service.j2"), dest=f"{base}/etc/units/{app}-scheduler.service", mode="644", unit_name="scheduler", unit_nice=10, **v)
files.template(name="Log rotation policy", src=tpl("logrotate.j2"), dest=f"{base}/etc/logrotate.shop", mode="644", **v)
shop.append(files.template(name="Application environment", src=tpl("app.env.j2"), dest=f"{base}/etc/conf.d/10-app.env", mode="640", **v))
files.template(name="Login banner", src=tpl("banner.j2"), dest=f"{base}/etc/banner", mode="644", **v)

# ---- links --------------------------------------------------------------------------------------
files.link(name="Current release link", path=f"{root}/current", target=release_dir)
proxy.append(files.link(name="Site is enabled", path=f"{base}/etc/proxy/sites-enabled/{app}.conf", target=f"{base}/etc/proxy/sites/{app}.conf"))
files.link(name="Logs from the shared directory", path=f"{root}/shared/log", target=f"{base}/var/log/{app}")
files.link(name="Control script link", path=f"{base}/bin/{app}-health", target=f"{base}/bin/healthcheck.sh")

# ---- vendor files edited in place ---------------------------------------------------------------
limits = f"{base}/etc/limits.conf"
if missing(limits):
    files.put(name="Vendor limits file", src=src("limits.conf"), dest=limits, mode="644")
files.line(name="Soft open-file limit", path=limits, line=rf"^{app}\s+soft\s+nofile", replace=f"{app}    soft    nofile    65536")
files.line(name="Hard open-file limit", path=limits, line=rf"^{app}\s+hard\s+nofile", replace=f"{app}    hard    nofile    65536")
files.line(name="Process limit", path=limits, line=rf"^{app}\s+soft\s+nproc", replace=f"{app}    soft    nproc     4096")
daemon = f"{base}/etc/daemon.conf"
if missing(daemon):
    files.put(name="Vendor daemon defaults", src=src("daemon.conf"), dest=daemon, mode="644")
shop.append(files.line(name="Daemon client limit", path=daemon, line=r"^#\?MaxClients", replace="MaxClients 256"))
files.line(name="Daemon timeout", path=daemon, line=r"^#\?Timeout", replace="Timeout 30")
files.line(name="Daemon keep-alive", path=daemon, line=r"^#\?KeepAlive", replace="KeepAlive yes")
files.line(name="Daemon debug mode is off", path=daemon, line=r"^DebugMode", present=False)
worker = f"{base}/etc/worker.ini"
files.line(name="Worker count", path=worker, line=r"^workers\s*=", replace=f"workers = {v['workers']}")
files.line(name="Retry attempts", path=worker, line=r"^attempts\s*=", replace="attempts = 5")
environment = f"{base}/etc/environment"
if missing(environment):
    files.file(name="Environment file exists", path=environment, mode="644")
files.line(name="PATH in the environment file", path=environment, line=r"^PATH=", replace=f"PATH={base}/bin:/usr/local/bin:/usr/bin:/bin")
files.line(name="Home in the environment file", path=environment, line=r"^SHOP_HOME=", replace=f"SHOP_HOME={root}")
hosts_local = f"{base}/etc/hosts.local"
if missing(hosts_local):
    files.file(name="Local names file exists", path=hosts_local, mode="644")
files.line(name="Local name of the shop", path=hosts_local, line=rf"\s{app}\.local$", replace=f"127.0.0.1 {app}.local")
files.line(name="Retired setting is gone", path=environment, line=r"^LEGACY_MODE=", present=False)

# ---- managed blocks -----------------------------------------------------------------------------
files.block(
    name="Upstream host names",
    path=hosts_local,
    content="".join(f"127.0.0.1 {u['name']}.{app}.local\n" for u in v["upstreams"]).rstrip("\n"),
    marker="# {mark} ANSIBLE MANAGED BLOCK",
)
files.block(name="Daemon tuning block", path=daemon, content="Workers 4\nListenBacklog 512\nSendFile on", marker="# {mark} shop tuning")
files.block(name="Proxy variables", path=environment, content="HTTP_PROXY=\nNO_PROXY=localhost,127.0.0.1,.local", marker="# {mark} proxy settings")
files.block(name="Queue definitions", path=worker, content="[queues]\nhigh = 4\nlow = 1", marker="; {mark} queues")

# ---- guarded commands ---------------------------------------------------------------------------
if missing(f"{base}/secrets/session.key"):
    server.shell(name="Session secret", commands=[f"umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \\n' > {base}/secrets/session.key"])
if missing(f"{base}/backups/shop.conf.orig"):
    server.shell(name="Configuration backup", commands=[f"cp -p {base}/etc/shop.conf {base}/backups/shop.conf.orig"])
if missing(f"{base}/backups/{app}-{app_version}.tgz"):
    server.shell(name="Release archive", commands=[f"tar -czf {base}/backups/{app}-{app_version}.tgz -C {root}/releases {app_version}"])
# The File fact is False (not None) for a path that is there but not a regular file, as a FIFO.
if host.get_fact(File, path=f"{base}/run/control.fifo") is None:
    server.shell(name="Control FIFO", commands=[f"mkfifo -m 0600 {base}/run/control.fifo"])
if missing(f"{base}/var/lib/{app}/db.initialised"):
    server.shell(name="Database initialised", commands=[f"printf 'schema 1\\n' > {base}/var/lib/{app}/db.initialised"])
if not host.get_fact(Directory, path=f"{base}/var/spool/{app}"):
    server.shell(name="Spool directory", commands=[f"install -d -m 0750 {base}/var/spool/{app}"])
if missing(f"{release_dir}/SHA256SUMS"):
    server.shell(name="Release checksums", commands=[f"cd {release_dir} && sha256sum app.py requirements.txt > SHA256SUMS"])
if not missing(f"{base}/run/install.lock"):
    server.shell(name="Stale install lock", commands=[f"rm -f {base}/run/install.lock"])

# ---- checks -------------------------------------------------------------------------------------
server.shell(name="Read the released code checksum", commands=[f"sha256sum {release_dir}/app.py >/dev/null"])
server.shell(name="Main configuration is private to the group", commands=[f'test "$(stat -c %a {base}/etc/shop.conf)" = 640'])
server.shell(
    name="Session secret is private",
    commands=[f'test "$(stat -c %a:%s {base}/secrets/session.key)" = 600:64'],
)
files.file(name="Session secret mode", path=f"{base}/secrets/session.key", mode="600", create_remote_dir=False, touch=False)
server.shell(name="Current release points at this version", commands=[f'test "$(readlink {root}/current)" = {release_dir}'])
with open(src("app.py"), "rb") as f:
    code_checksum = hashlib.sha256(f.read()).hexdigest()
env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(BENCH, "templates")), keep_trailing_newline=True)
conf_checksum = hashlib.sha1(env.get_template("shop.conf.j2").render(**v).encode()).hexdigest()
files.put(
    name="Deployment record",
    src=content(
        json.dumps({"app": app, "version": app_version, "code_sha256": code_checksum, "conf_sha1": conf_checksum})
        + "\n"
    ),
    dest=f"{base}/var/lib/{app}/deployed.json",
    mode="600",
)

# ---- handlers -----------------------------------------------------------------------------------
if missing(f"{base}/run/proxy.reload-requested"):
    server.shell(name="reload proxy", commands=[f"touch {base}/run/proxy.reload-requested"], _if=any_changed(*proxy))
if missing(f"{base}/run/shop.restart-requested"):
    server.shell(name="restart shop", commands=[f"touch {base}/run/shop.restart-requested"], _if=any_changed(*shop))

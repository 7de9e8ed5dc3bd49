//! The virtualization facts (`virtualization_type`, `virtualization_role`,
//! `virtualization_tech_guest`, `virtualization_tech_host`), decided from the same evidence, in
//! the same order, as ansible-core's Linux collector: containers first (PID 1's cgroups and
//! environment, `/run/systemd/container`, `/.dockerenv`), then Xen, the DMI strings of known
//! hypervisors, `/proc/cpuinfo`, the loaded kernel modules and `/dev/kvm`. The first
//! evidence names the type and role; every piece adds to the technology lists.

use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::path::Path;

/// Where the evidence is read: `/` on a host, a fixture directory in tests.
struct Evidence<'a> {
    root: &'a Path,
}

impl Evidence<'_> {
    fn read(&self, p: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(p.trim_start_matches('/'))).ok()
    }

    /// A file's content, trimmed, when it has any (as ansible-core's `get_file_content`).
    fn content(&self, p: &str) -> Option<String> {
        self.read(p)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    fn exists(&self, p: &str) -> bool {
        self.root.join(p.trim_start_matches('/')).exists()
    }
}

#[derive(Default)]
struct Found {
    kind: Option<String>,
    role: Option<String>,
    guest: BTreeSet<String>,
    host: BTreeSet<String>,
}

impl Found {
    fn found(&self) -> bool {
        self.kind.is_some()
    }

    /// Guest evidence: `tech` is added; the type and role are set by the first evidence only.
    fn guest(&mut self, tech: &str, kind: &str) {
        self.guest.insert(tech.to_string());
        if !self.found() {
            self.kind = Some(kind.to_string());
            self.role = Some("guest".into());
        }
    }
}

/// `/docker/` or `/docker-<hex>.scope` in a cgroup line.
fn docker_cgroup(line: &str) -> bool {
    line.match_indices("/docker").any(|(i, m)| {
        let rest = &line[i + m.len()..];
        rest.starts_with('/')
            || rest.strip_prefix('-').is_some_and(|r| {
                let hex = r.chars().take_while(char::is_ascii_hexdigit).count();
                hex > 0 && r[hex..].starts_with(".scope")
            })
    })
}

/// The four facts for this host.
pub fn facts() -> Map<String, Value> {
    collect(&Evidence {
        root: Path::new("/"),
    })
}

fn collect(ev: &Evidence) -> Map<String, Value> {
    let mut f = Found::default();
    if let Some(cgroup) = ev.read("/proc/1/cgroup") {
        for line in cgroup.lines() {
            if docker_cgroup(line) {
                f.guest("docker", "docker");
            }
            if line.contains("/lxc/") || line.contains("/machine.slice/machine-lxc") {
                f.guest("lxc", "lxc");
            }
            if line.contains("/system.slice/containerd.service") {
                f.guest("containerd", "containerd");
            }
        }
    }
    if let Some(environ) = ev.read("/proc/1/environ") {
        for var in environ.split('\0') {
            if var.contains("container=lxc") {
                f.guest("lxc", "lxc");
            }
            if var.contains("container=podman") {
                f.guest("podman", "podman");
            }
            if var.starts_with("container=") && var.len() > "container=".len() {
                f.guest("container", "container");
            }
        }
    }
    if ev.exists("/proc/vz") && !ev.exists("/proc/lve") {
        let host = ev.exists("/proc/bc");
        if host {
            f.host.insert("openvz".into());
        } else {
            f.guest.insert("openvz".into());
        }
        if !f.found() {
            f.role = Some(if host { "host" } else { "guest" }.into());
        }
        // ansible-core names the type openvz here even when a container was seen first.
        f.kind = Some("openvz".into());
    }
    let systemd_container = ev.content("/run/systemd/container");
    if let Some(c) = &systemd_container {
        f.guest(c, c);
    }
    if ev.exists("/.dockerenv") || ev.exists("/.dockerinit") {
        f.guest("docker", "docker");
    }
    let containers = ["docker", "lxc", "podman", "openvz", "containerd"];
    if containers.iter().any(|c| f.guest.contains(*c)) || systemd_container.is_some() {
        f.guest.insert("container".into());
    }
    if ev.exists("/proc/xen") {
        let xen_host = ev
            .read("/proc/xen/capabilities")
            .is_some_and(|c| c.contains("control_d"));
        if xen_host {
            f.host.insert("xen".into());
            if !f.found() {
                f.kind = Some("xen".into());
                f.role = Some("host".into());
            }
        } else if !f.found() {
            f.kind = Some("xen".into());
            f.role = Some("guest".into());
        }
    }
    // From here on a guest found by DMI keeps the role `guest` ansible-core sets up front.
    let dmi = |name: &str| ev.content(&format!("/sys/devices/virtual/dmi/id/{name}"));
    let product_name = dmi("product_name").unwrap_or_default();
    let sys_vendor = dmi("sys_vendor").unwrap_or_default();
    let product_family = dmi("product_family").unwrap_or_default();
    let bios_vendor = dmi("bios_vendor").unwrap_or_default();
    let dmi_guest = |f: &mut Found, tech: &str| f.guest(tech, tech);
    if [
        "KVM",
        "KVM Server",
        "Bochs",
        "AHV",
        "CloudStack KVM Hypervisor",
    ]
    .contains(&product_name.as_str())
    {
        dmi_guest(&mut f, "kvm");
    }
    if sys_vendor == "oVirt" {
        dmi_guest(&mut f, "oVirt");
    }
    if sys_vendor == "Red Hat" {
        if product_family == "RHV" {
            dmi_guest(&mut f, "RHV");
        } else if product_name == "RHEV Hypervisor" {
            dmi_guest(&mut f, "RHEV");
        }
    }
    if product_name.starts_with("VMware") {
        dmi_guest(&mut f, "VMware");
    }
    if ["OpenStack Compute", "OpenStack Nova"].contains(&product_name.as_str()) {
        dmi_guest(&mut f, "openstack");
    }
    if bios_vendor == "Xen" {
        dmi_guest(&mut f, "xen");
    }
    if bios_vendor == "innotek GmbH" {
        dmi_guest(&mut f, "virtualbox");
    }
    if ["Amazon EC2", "DigitalOcean", "Hetzner", "Linode"].contains(&bios_vendor.as_str()) {
        dmi_guest(&mut f, "kvm");
    }
    if [
        "QEMU",
        "Amazon EC2",
        "DigitalOcean",
        "Google",
        "Scaleway",
        "Nutanix",
    ]
    .contains(&sys_vendor.as_str())
    {
        dmi_guest(&mut f, "kvm");
    }
    for (vendor, tech) in [
        ("KubeVirt", "KubeVirt"),
        ("Microsoft Corporation", "VirtualPC"),
        ("Parallels Software International Inc.", "parallels"),
        ("OpenStack Foundation", "openstack"),
    ] {
        if sys_vendor == vendor {
            dmi_guest(&mut f, tech);
        }
    }
    if let Some(cpuinfo) = ev.read("/proc/cpuinfo") {
        for line in cpuinfo.lines() {
            let tech = if line.starts_with("model name") && line.contains("QEMU Virtual CPU") {
                "kvm"
            } else if line.starts_with("vendor_id") && line.contains("User Mode Linux")
                || line.starts_with("model name") && line.contains("UML")
            {
                "uml"
            } else if line.starts_with("vendor_id") && line.contains("PowerVM Lx86") {
                "powervm_lx86"
            } else {
                continue;
            };
            f.guest(tech, tech);
        }
    }
    if let Some(modules) = ev.read("/proc/modules") {
        let loaded: BTreeSet<&str> = modules
            .lines()
            .filter_map(|l| l.split(' ').next())
            .collect();
        for (module, tech, role) in [
            ("kvm", "kvm", "host"),
            ("vboxdrv", "virtualbox", "host"),
            ("virtio", "kvm", "guest"),
        ] {
            if loaded.contains(module) {
                f.host.insert(tech.into());
                if !f.found() {
                    f.kind = Some(tech.into());
                    f.role = Some(role.into());
                }
            }
        }
    }
    if ev.exists("/dev/kvm") {
        f.host.insert("kvm".into());
        if !f.found() {
            f.kind = Some("kvm".into());
            f.role = Some("host".into());
        }
    }
    let mut out = Map::new();
    out.insert(
        "virtualization_type".into(),
        json!(f.kind.as_deref().unwrap_or("NA")),
    );
    out.insert(
        "virtualization_role".into(),
        json!(f
            .role
            .as_deref()
            .unwrap_or(if f.found() { "guest" } else { "NA" })),
    );
    out.insert("virtualization_tech_guest".into(), json!(f.guest));
    out.insert("virtualization_tech_host".into(), json!(f.host));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, p: &str, content: &str) {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    #[test]
    fn a_docker_container_on_a_kvm_host() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), ".dockerenv", "");
        write(d.path(), "proc/1/cgroup", "0::/\n");
        write(d.path(), "dev/kvm", "");
        let f = collect(&Evidence { root: d.path() });
        assert_eq!(f["virtualization_type"], "docker");
        assert_eq!(f["virtualization_role"], "guest");
        assert_eq!(
            f["virtualization_tech_guest"],
            json!(["container", "docker"])
        );
        assert_eq!(f["virtualization_tech_host"], json!(["kvm"]));
    }

    #[test]
    fn docker_cgroup_lines() {
        assert!(docker_cgroup("0::/docker/0123abc"));
        assert!(docker_cgroup(
            "1:name=systemd:/system.slice/docker-0123abc.scope"
        ));
        assert!(!docker_cgroup("0::/system.slice/dockerd.service"));
        assert!(!docker_cgroup("0::/docker-x.scope"));
    }

    #[test]
    fn nothing_found_is_na() {
        let d = tempfile::tempdir().unwrap();
        let f = collect(&Evidence { root: d.path() });
        assert_eq!(f["virtualization_type"], "NA");
        assert_eq!(f["virtualization_role"], "NA");
        assert_eq!(f["virtualization_tech_guest"], json!([]));
    }

    #[test]
    fn a_qemu_guest_by_dmi() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sys/devices/virtual/dmi/id/sys_vendor", "QEMU\n");
        let f = collect(&Evidence { root: d.path() });
        assert_eq!(f["virtualization_type"], "kvm");
        assert_eq!(f["virtualization_role"], "guest");
        assert_eq!(f["virtualization_tech_guest"], json!(["kvm"]));
    }
}

//! Placeholder inventory (implicit localhost only) until the real parser lands.
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
#[derive(Debug)]
pub struct InventoryError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub col: Option<usize>,
    pub msg: String,
}
impl std::fmt::Display for InventoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.msg)
    }
}
pub struct Inventory;
impl Inventory {
    pub fn load(_p: &Path) -> Result<Inventory, InventoryError> {
        Ok(Inventory)
    }
    pub fn implicit_localhost() -> Inventory {
        Inventory
    }
    pub fn load_vars_dir(&mut self, _d: &Path) -> Result<(), InventoryError> {
        Ok(())
    }
    pub fn select(&self, _p: &str) -> Result<Vec<String>, InventoryError> {
        Ok(vec!["localhost".into()])
    }
    pub fn host_vars(&self, _h: &str) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("ansible_connection".into(), "local".into());
        m
    }
    pub fn groups_map(&self) -> BTreeMap<String, Vec<String>> {
        BTreeMap::new()
    }
    pub fn host_json(&self, _h: &str) -> Option<Value> {
        None
    }
    pub fn to_graph(&self, _g: Option<&str>) -> String {
        String::new()
    }
    pub fn to_list_json(&self) -> Value {
        Value::Null
    }
}

//! The machine files under `crates/pto-wsp/machines/` as a user reads them: by path, from disk.
//! (The library itself never touches files; this test does, so it lives outside `src/`.)

use pto_wsp::machine;

/// Every shipped machine file, read as a user's file would be (by path), loads and validates;
/// a machine file that is not shipped is found by `resolve` through the reader.
#[test]
fn every_shipped_file_loads_from_its_path() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/machines");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut names: Vec<String> = machine::shipped_names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    names.sort();
    assert_eq!(
        on_disk, names,
        "every file under machines/ is shipped, and only those"
    );
    for name in names {
        let path = format!("{dir}/{name}.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let m = machine::Machine::parse(&text, &path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.meta.name, name);
        assert_eq!(Some(m), machine::shipped(&name));
    }
}

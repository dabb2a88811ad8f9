//! `.npy` files written by numpy (`test_data/npy/`, see its README) read into tensors exactly,
//! and tensors written back byte for byte as numpy writes them; every mismatch an error naming
//! the tensor.

use half::f16;
use pto_wsp_ir::{Bindings, DType};
use pto_wsp_kernels::TensorStore;
use pto_wsp_kernels::npy::{NpyArray, NpyError};

use crate::module;

fn file(name: &str) -> Vec<u8> {
    let path = format!("{}/../../test_data/npy/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn npy_store() -> TensorStore {
    let m = module(
        "tensor A: f32[2, 3, 4];\ntensor H: f16[3, 4];\ntensor I: i32[3, 4];\ntensor B: bf16[2, 2];\n\
         tensor Wrong: f32[3, 4];",
    );
    TensorStore::new(&m, &Bindings::new()).unwrap()
}

#[test]
fn numpy_files_are_read_exactly_and_written_back_identically() {
    let mut s = npy_store();
    let a = NpyArray::parse(&file("f32_2x3x4.npy")).unwrap();
    s.load_npy("A", &a).unwrap();
    // The values numpy computed, recomputed here with the same IEEE operations.
    let want: Vec<f32> = (0..24).map(|i| i as f32 * 0.37f32 - 3.5f32).collect();
    assert_eq!(s.read::<f32>("A").unwrap(), want);
    assert_eq!(s.to_npy("A").unwrap(), file("f32_2x3x4.npy"));

    let h = NpyArray::parse(&file("f16_3x4.npy")).unwrap();
    s.load_npy("H", &h).unwrap();
    let want: Vec<f16> = (0..12).map(|i| f16::from_f32(i as f32 / 7.0)).collect();
    assert_eq!(s.read::<f16>("H").unwrap(), want);
    assert_eq!(s.to_npy("H").unwrap(), file("f16_3x4.npy"));

    let i = NpyArray::parse(&file("i32_3x4.npy")).unwrap();
    s.load_npy("I", &i).unwrap();
    let want: Vec<i32> = (0..12).map(|k| (k - 5) * 1_000_003).collect();
    assert_eq!(s.read::<i32>("I").unwrap(), want);
    assert_eq!(
        i.to_i64s().unwrap(),
        want.iter().map(|&x| x as i64).collect::<Vec<_>>()
    );
    assert_eq!(s.to_npy("I").unwrap(), file("i32_3x4.npy"));

    // A big-endian file holds the same values.
    let mut s2 = npy_store();
    s2.load_npy(
        "A",
        &NpyArray::parse(&file("f32_big_endian_2x3x4.npy")).unwrap(),
    )
    .unwrap();
    assert_eq!(s2.read::<f32>("A").unwrap(), s.read::<f32>("A").unwrap());
}

#[test]
fn bf16_tensors_travel_as_raw_bits() {
    let mut s = npy_store();
    let bits: Vec<u16> = vec![0x3f80, 0xc000, 0x0001, 0x7f80];
    s.write("B", &bits).unwrap();
    let bytes = s.to_npy("B").unwrap();
    let a = NpyArray::parse(&bytes).unwrap();
    assert_eq!(a.descr, "<u2");
    assert_eq!(a.shape, vec![2, 2]);
    let mut back = npy_store();
    back.load_npy("B", &a).unwrap();
    assert_eq!(back.read::<u16>("B").unwrap(), bits);
}

#[test]
fn mismatches_name_the_tensor() {
    let mut s = npy_store();
    let a = NpyArray::parse(&file("f32_2x3x4.npy")).unwrap();
    let e = s.load_npy("Wrong", &a).unwrap_err();
    assert!(matches!(e, NpyError::Shape { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("`Wrong`") && msg.contains("(3, 4)") && msg.contains("(2, 3, 4)"),
        "{msg}"
    );

    let e = s
        .load_npy("H", &NpyArray::parse(&file("i32_3x4.npy")).unwrap())
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("`H`")
            && msg.contains("f16")
            && msg.contains("int32")
            && msg.contains("numpy.float16"),
        "{msg}"
    );
    assert!(matches!(
        e,
        NpyError::DType {
            expected: DType::F16,
            ..
        }
    ));

    let e = NpyArray::parse(&file("f64_4.npy")).unwrap();
    let err = s.load_npy("A", &e).unwrap_err().to_string();
    assert!(
        err.contains("`A`") && err.contains("float64") && err.contains("numpy.float32"),
        "{err}"
    );

    assert_eq!(
        NpyArray::parse(&file("f32_fortran_2x3.npy")).unwrap_err(),
        NpyError::FortranOrder
    );
    let e = s.load_npy("Nope", &a).unwrap_err();
    assert_eq!(e, NpyError::UnknownTensor("Nope".into()));
    assert!(s.to_npy("Nope").is_err());
}

/// A header read on its own, then the data copied into the buffer `npy_targets` hands out and
/// put in native byte order, gives the tensor `load_npy` gives; a tensor named twice, or a
/// header that does not fit, is refused before any buffer is handed out.
#[test]
fn headers_then_direct_reads_match_whole_file_loads() {
    use pto_wsp_kernels::npy::NpyHeader;
    let (mut direct, mut whole) = (npy_store(), npy_store());
    let names = [
        ("A", "f32_big_endian_2x3x4.npy"),
        ("H", "f16_3x4.npy"),
        ("I", "i32_3x4.npy"),
    ];
    let files: Vec<Vec<u8>> = names.iter().map(|(_, f)| file(f)).collect();
    let headers: Vec<NpyHeader> = files
        .iter()
        .map(|b| NpyHeader::read(&mut std::io::Cursor::new(b)).unwrap())
        .collect();
    for (h, b) in headers.iter().zip(&files) {
        assert_eq!(*h, NpyHeader::parse(b).unwrap());
        assert_eq!(h.data_offset + h.data_len, b.len());
    }
    let named: Vec<(&str, &NpyHeader)> = names.iter().map(|(n, _)| *n).zip(&headers).collect();
    let targets = direct.npy_targets(&named).unwrap();
    for ((target, h), b) in targets.into_iter().zip(&headers).zip(&files) {
        target.copy_from_slice(&b[h.data_offset..]);
        h.to_native(target);
    }
    for ((n, _), b) in names.iter().zip(&files) {
        whole.load_npy(n, &NpyArray::parse(b).unwrap()).unwrap();
    }
    assert_eq!(direct.to_npy("A").unwrap(), whole.to_npy("A").unwrap());
    assert_eq!(direct.to_npy("H").unwrap(), whole.to_npy("H").unwrap());
    assert_eq!(direct.to_npy("I").unwrap(), whole.to_npy("I").unwrap());
    assert_eq!(direct.to_npy("A").unwrap(), file("f32_2x3x4.npy"));

    let twice = [("A", &headers[0]), ("A", &headers[0])];
    assert!(
        matches!(direct.npy_targets(&twice), Err(NpyError::Format(m)) if m.contains("more than one"))
    );
    let wrong = [("Wrong", &headers[0])];
    assert!(matches!(
        direct.npy_targets(&wrong),
        Err(NpyError::Shape { .. })
    ));
}

/// Tensors an input supplies are left alone by the seeded fill; every other tensor gets
/// exactly the bytes of a full fill.
#[test]
fn fill_skips_given_tensors_and_leaves_the_others_unchanged() {
    let (mut all, mut some) = (npy_store(), npy_store());
    all.fill_random(9);
    let a = some.index_of("A").unwrap();
    some.fill_random_except(9, &[a]);
    assert!(some.read::<f32>("A").unwrap().iter().all(|&x| x == 0.0));
    assert_ne!(
        all.read::<f32>("A").unwrap(),
        some.read::<f32>("A").unwrap()
    );
    for name in ["H", "I", "B", "Wrong"] {
        let t = all.index_of(name).unwrap();
        assert_eq!(all.bytes(t), some.bytes(t), "{name}");
    }
}

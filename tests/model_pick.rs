//! Picking among several cached models by a short warm-up (feature `local-llm`), on the
//! **real** model file: a model cache holding two chat GGUFs (the test model, twice, under two
//! names) makes `build_client` measure both, keep one loaded, and say which and why in the
//! usage report. An explicit model skips the warm-up.
//!
//! The model is `GA_LOCAL_MODEL` or the first default file in the model cache. Without it this
//! test prints why and passes — unless `GA_REQUIRE_LOCAL_MODEL` is set (as `scripts/test.sh`
//! and CI do), then it fails.

use std::time::Instant;

use bevy_generative_agents::llm::{BackendChoice, LlmConfig, build_client};

#[path = "support/local_model_file.rs"]
mod local_model_file;
use local_model_file::model_path;

#[test]
fn several_cached_models_are_picked_by_a_warm_up() {
    let Some(model) = model_path() else { return };
    let cache = std::env::temp_dir().join(format!("ga-model-pick-cache-{}", std::process::id()));
    std::fs::create_dir_all(&cache).expect("a temporary model cache");
    // Two names for one file: a symbolic link costs no disk.
    for name in ["a-model.gguf", "b-model.gguf"] {
        let link = cache.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&model, &link).expect("a link to the model");
    }
    let config = LlmConfig {
        backend: BackendChoice::Local,
        local_model: None,
        model_cache: Some(cache.clone()),
        ..LlmConfig::default()
    };
    let start = Instant::now();
    let client = build_client(&config).expect("a picked model loads");
    let took = start.elapsed();
    let usage = client.usage();
    let pick = usage
        .model_pick
        .clone()
        .expect("the pick is in the usage report");
    assert_eq!(pick.candidates.len(), 2, "{pick:?}");
    assert!(
        pick.candidates
            .iter()
            .all(|c| c.tokens_per_second.is_some_and(|s| s > 0.0)),
        "both were measured: {pick:?}"
    );
    assert!(["a-model.gguf", "b-model.gguf"].contains(&pick.file.as_str()));
    assert!(!pick.reason.is_empty());
    assert_eq!(client.model_pick(), Some(&pick));
    let json = usage.to_json_pretty();
    assert!(json.contains("\"model_pick\""), "{json}");
    eprintln!("picked {} in {took:?}: {}", pick.file, pick.reason);
    client.shut_down();

    // A model given explicitly is the model: no warm-up, no pick.
    let explicit = LlmConfig {
        local_model: Some(model),
        ..config
    };
    let client = build_client(&explicit).expect("the model loads");
    assert_eq!(client.usage().model_pick, None);
    client.shut_down();
    let _ = std::fs::remove_dir_all(&cache);
}

//! The real model file the local-model tests load: `GA_LOCAL_MODEL` or the first default file
//! in the model cache (`scripts/fetch-model.sh` puts it there). Without it a test prints why
//! and passes — unless `GA_REQUIRE_LOCAL_MODEL` is set (as `scripts/test.sh` and CI do), then
//! it fails.

use std::path::PathBuf;

use bevy_generative_agents::llm::LlmConfig;

/// The model file, or `None` (after saying why) when a test should skip.
pub fn model_path() -> Option<PathBuf> {
    let path = LlmConfig::from_env()
        .ok()
        .and_then(|c| c.local_model_path())
        .filter(|p| p.is_file());
    if path.is_none() {
        let required = std::env::var("GA_REQUIRE_LOCAL_MODEL").is_ok_and(|v| !v.is_empty());
        assert!(
            !required,
            "GA_REQUIRE_LOCAL_MODEL is set but no model file was found: run \
             scripts/fetch-model.sh or set GA_LOCAL_MODEL"
        );
        eprintln!(
            "SKIPPED: no local model file (run scripts/fetch-model.sh or set GA_LOCAL_MODEL; \
             set GA_REQUIRE_LOCAL_MODEL=1 to make this a failure)"
        );
    }
    path
}

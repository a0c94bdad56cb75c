//! [`LlmPlugin`]: makes sure the app has an [`LlmClient`], and shuts its backend down when
//! the app exits.

use bevy::prelude::*;

use super::client::LlmClient;
use super::config::{LlmConfig, build_client};

/// Inserts the [`LlmClient`] resource unless the app already has one.
///
/// A game that brings its own backend inserts its client **before** adding the plugin (as
/// `create_test_app` does); otherwise the client is built from the plugin's config, or — by
/// default — from the environment (`GA_LLM_*`, see [`LlmConfig`]). A configuration that
/// cannot be honoured is logged as an error and replaced by the scripted backend, whose name
/// (`"scripted"`) the HUD and the usage report show, so the sim still starts.
///
/// On `AppExit` (in `Last`) the client's backend is shut down ([`LlmClient::shut_down`]):
/// the embedded model's thread stops and is joined before `App::run` returns, so the process
/// never exits while llama.cpp is decoding.
#[derive(Debug, Clone, Default)]
pub struct LlmPlugin {
    /// The configuration to build the client from; `None` reads the environment at build time.
    pub config: Option<LlmConfig>,
}

impl LlmPlugin {
    /// Builds the client from `config` instead of the environment.
    pub(crate) fn with_config(config: LlmConfig) -> Self {
        Self {
            config: Some(config),
        }
    }
}

impl Plugin for LlmPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(Last, shut_down_on_exit);
        if app.world().contains_resource::<LlmClient>() {
            return;
        }
        let config = match &self.config {
            Some(config) => Ok(config.clone()),
            None => LlmConfig::from_env(),
        };
        let client = config.and_then(|config| build_client(&config)).unwrap_or_else(|err| {
            error!("LLM configuration failed ({err}); falling back to the offline SCRIPTED backend, not a model");
            LlmClient::new(std::sync::Arc::new(super::offline::town_script_backend(0)))
        });
        info!(
            "LLM backend: {} (model {})",
            client.backend_name(),
            client.model()
        );
        app.insert_resource(client);
    }
}

/// Shuts the backend down in the frame the app is asked to exit.
fn shut_down_on_exit(mut exits: MessageReader<AppExit>, client: Option<Res<LlmClient>>) {
    if exits.read().next().is_some()
        && let Some(client) = client
    {
        info!("app exit: shutting the LLM backend down");
        client.shut_down();
    }
}

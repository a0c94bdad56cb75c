//! [`LlmPlugin`]: makes sure the app has an [`LlmClient`], and shuts its backend down when
//! the app exits.

use bevy::app::MainScheduleOrder;
use bevy::ecs::schedule::ScheduleLabel;
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
/// When the app is asked to exit, the client's backend is shut down ([`LlmClient::shut_down`]):
/// the embedded model's thread stops and is joined before `App::run` returns, so the process
/// never exits while llama.cpp is decoding. That happens in [`LlmShutDown`], a schedule of its
/// own that runs after `Last` in every frame, so an `AppExit` written by any system — even
/// one in `Last` itself, as the game's screenshot mode does — is seen in the frame it is
/// written, the last frame the app's runner gives.
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
        app.init_schedule(LlmShutDown);
        if let Some(mut order) = app.world_mut().get_resource_mut::<MainScheduleOrder>() {
            order.insert_after(Last, LlmShutDown);
        }
        app.add_systems(LlmShutDown, shut_down_on_exit);
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

/// The schedule, after `Last`, in which [`LlmPlugin`] shuts the backend down when an
/// `AppExit` has been written this frame. Nothing else should run in it: a system that writes
/// `AppExit` here could still be missed.
#[derive(ScheduleLabel, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LlmShutDown;

/// Shuts the backend down in the frame the app is asked to exit.
fn shut_down_on_exit(mut exits: MessageReader<AppExit>, client: Option<Res<LlmClient>>) {
    if exits.read().next().is_some()
        && let Some(client) = client
    {
        info!("app exit: shutting the LLM backend down");
        client.shut_down();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::llm::{BoxFuture, ChatRequest, ChatResponse, LlmBackend, LlmError, ScriptedBackend};

    /// The scripted backend, counting how often it is shut down.
    struct Counting {
        inner: ScriptedBackend,
        shut_downs: AtomicUsize,
    }

    impl LlmBackend for Counting {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn model(&self) -> &str {
            self.inner.model()
        }
        fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
            self.inner.chat(request)
        }
        fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
            self.inner.embed(texts)
        }
        fn embedding_model(&self) -> &str {
            self.inner.embedding_model()
        }
        fn embedding_dim(&self) -> usize {
            self.inner.embedding_dim()
        }
        fn shut_down(&self) {
            self.shut_downs.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn app_with(backend: &Arc<Counting>) -> App {
        let mut app = App::new();
        app.insert_resource(LlmClient::new(backend.clone()))
            .add_plugins(LlmPlugin::default());
        app
    }

    fn exit_now(mut exits: MessageWriter<AppExit>) {
        exits.write(AppExit::Success);
    }

    #[test]
    fn an_exit_written_in_last_shuts_the_backend_down_in_the_same_frame() {
        let backend = Arc::new(Counting {
            inner: ScriptedBackend::new(1),
            shut_downs: AtomicUsize::new(0),
        });
        let mut app = app_with(&backend);
        app.update();
        app.update();
        assert_eq!(
            backend.shut_downs.load(Ordering::SeqCst),
            0,
            "no exit, no shut-down"
        );
        // The game's screenshot mode writes its exit in `Last`; the runner stops after the
        // frame in which the exit appears, so the shut-down must happen in that frame.
        app.add_systems(Last, exit_now);
        app.update();
        assert!(app.should_exit().is_some());
        assert_eq!(backend.shut_downs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_shut_down_schedule_runs_after_last() {
        let backend = Arc::new(Counting {
            inner: ScriptedBackend::new(1),
            shut_downs: AtomicUsize::new(0),
        });
        let app = app_with(&backend);
        let order = app.world().resource::<MainScheduleOrder>();
        let last = order.labels.iter().position(|l| *l == Last.intern());
        let shut = order.labels.iter().position(|l| *l == LlmShutDown.intern());
        assert_eq!(shut, last.map(|i| i + 1), "{:?}", order.labels);
    }
}

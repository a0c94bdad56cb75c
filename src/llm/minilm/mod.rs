//! An in-process sentence embedder: **all-MiniLM-L6-v2** (sentence-transformers; BERT, 6
//! layers, 384 dimensions, uncased WordPiece), in pure Rust, for memory relevance (SPEC §3.2).
//!
//! A chat model's pooled hidden states are not sentence embeddings; this model was trained for
//! exactly the question retrieval asks (which memory is about the same thing as the focal
//! point). [`MiniLm`] loads the model's own files — `model.safetensors`, `vocab.txt`,
//! `config.json`, which `scripts/fetch-model.sh` puts in `all-MiniLM-L6-v2/` inside the model
//! cache — checking every tensor's name, dtype and shape, and embeds texts in packed batches
//! (see `model.rs`): the mean of the token vectors over the text, L2-normalised, as
//! sentence-transformers computes it. Texts longer than [`MINILM_MAX_TOKENS`] word pieces are
//! cut, as the model was trained.
//!
//! [`MiniLmEmbedder`] runs it on a thread of its own, so callers on task pools just await, and
//! [`SentenceEmbeddings`] puts it in front of any backend: chat, choices and everything else go
//! to the wrapped backend, embeddings to MiniLM, and [`LlmBackend::embedding_model`] says
//! [`MINILM_NAME`] so saves record it. The embedded local default uses it whenever the files
//! are in the model cache (`build_backend`).

pub mod judge;
mod model;
mod safetensors;
mod tokenizer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;

use super::backend::{
    BoxFuture, ChatRequest, ChatResponse, ChoiceRequest, LlmBackend, LlmError, RetryHook,
};
use super::usage::EndpointUsage;
use model::{Bert, BertConfig};
use tokenizer::WordPiece;

/// The embedding model's name, recorded in saves and cache keys.
pub const MINILM_NAME: &str = "all-MiniLM-L6-v2";
/// The folder inside the model cache that holds the files (see [`minilm_dir`]).
pub const MINILM_DIR: &str = "all-MiniLM-L6-v2";
/// The files [`MiniLm::load`] reads from that folder.
pub const MINILM_FILES: [&str; 3] = ["model.safetensors", "vocab.txt", "config.json"];
/// The longest input in word pieces, `[CLS]` and `[SEP]` included (the model's training
/// length; longer texts are cut).
pub const MINILM_MAX_TOKENS: usize = 256;
/// Word pieces per packed forward pass: large enough that the matrix products run at full
/// speed, small enough that the activations stay a few megabytes whatever the input.
const PACK_TOKENS: usize = 2048;
/// Largest `vocab.txt` or `config.json` read (the real ones are 232 KB and 612 bytes).
const MAX_TEXT_FILE: u64 = 16 << 20;

/// The MiniLM folder inside `model_cache` when all of [`MINILM_FILES`] are there.
pub fn minilm_dir(model_cache: &Path) -> Option<PathBuf> {
    let dir = model_cache.join(MINILM_DIR);
    MINILM_FILES
        .iter()
        .all(|file| dir.join(file).is_file())
        .then_some(dir)
}

/// Why the model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum MiniLmError {
    /// A file is not there.
    #[error("{path}: not found (scripts/fetch-model.sh fetches all-MiniLM-L6-v2)")]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// A file is there but unusable.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The embedding thread could not be started.
    #[error("the embedding thread: {0}")]
    Thread(String),
}

/// The sentence-embedding model, loaded.
pub struct MiniLm {
    name: String,
    tokenizer: WordPiece,
    bert: Bert,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm")
            .field("name", &self.name)
            .field("config", self.bert.config())
            .finish_non_exhaustive()
    }
}

fn read_text(path: &Path) -> Result<String, MiniLmError> {
    let invalid = |reason: String| MiniLmError::Invalid {
        path: path.to_owned(),
        reason,
    };
    crate::files::read_text_at_most(path, MAX_TEXT_FILE).map_err(|err| match err.io_kind() {
        Some(std::io::ErrorKind::NotFound) => MiniLmError::Missing {
            path: path.to_owned(),
        },
        _ => invalid(err.to_string()),
    })
}

impl MiniLm {
    /// Loads `model.safetensors`, `vocab.txt` and `config.json` from `dir` (the folder
    /// [`minilm_dir`] finds), named [`MINILM_NAME`].
    pub fn load(dir: &Path) -> Result<Self, MiniLmError> {
        let config_path = dir.join("config.json");
        let config = BertConfig::parse(&read_text(&config_path)?).map_err(|reason| {
            MiniLmError::Invalid {
                path: config_path,
                reason,
            }
        })?;
        let vocab_path = dir.join("vocab.txt");
        let tokenizer = WordPiece::from_vocab(&read_text(&vocab_path)?).map_err(|reason| {
            MiniLmError::Invalid {
                path: vocab_path.clone(),
                reason,
            }
        })?;
        if tokenizer.id_count() > config.vocab_size {
            return Err(MiniLmError::Invalid {
                path: vocab_path,
                reason: format!(
                    "{} tokens, but the model has {} embeddings",
                    tokenizer.id_count(),
                    config.vocab_size
                ),
            });
        }
        if config.max_position_embeddings < MINILM_MAX_TOKENS {
            return Err(MiniLmError::Invalid {
                path: dir.join("config.json"),
                reason: format!(
                    "max_position_embeddings {} is below {MINILM_MAX_TOKENS}",
                    config.max_position_embeddings
                ),
            });
        }
        let weights_path = dir.join("model.safetensors");
        if !weights_path.is_file() {
            return Err(MiniLmError::Missing { path: weights_path });
        }
        let invalid = |reason: String| MiniLmError::Invalid {
            path: weights_path.clone(),
            reason,
        };
        let mut file = safetensors::SafeTensors::open(&weights_path).map_err(invalid)?;
        let bert = Bert::load(&mut file, config).map_err(invalid)?;
        Ok(Self {
            name: MINILM_NAME.to_owned(),
            tokenizer,
            bert,
        })
    }

    /// The model's name ([`MINILM_NAME`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The length of every vector (384).
    pub fn dim(&self) -> usize {
        self.bert.config().hidden_size
    }

    /// The token ids of `text` as the model reads it: `[CLS]`, word pieces, `[SEP]`, at most
    /// [`MINILM_MAX_TOKENS`] in all.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, MINILM_MAX_TOKENS)
    }

    /// The L2-normalised embedding of each text, in order. Texts are run in packed batches of
    /// up to a few thousand word pieces; any number of texts of any length is fine.
    pub fn embed<S: AsRef<str>>(&self, texts: &[S]) -> Vec<Vec<f32>> {
        let mut out = Vec::with_capacity(texts.len());
        let mut pack: Vec<Vec<u32>> = Vec::new();
        let mut tokens = 0;
        for text in texts {
            let ids = self.tokenize(text.as_ref());
            if tokens + ids.len() > PACK_TOKENS && !pack.is_empty() {
                out.extend(self.bert.embed_packed(&pack));
                pack.clear();
                tokens = 0;
            }
            tokens += ids.len();
            pack.push(ids);
        }
        if !pack.is_empty() {
            out.extend(self.bert.embed_packed(&pack));
        }
        out
    }
}

/// A job for the embedding thread.
struct EmbedJob {
    texts: Vec<String>,
    reply: async_channel::Sender<Vec<Vec<f32>>>,
}

/// [`MiniLm`] on a thread of its own: cheap to clone, calls are awaited, jobs run one at a
/// time in arrival order. The thread ends when the last handle is dropped.
#[derive(Clone)]
pub struct MiniLmEmbedder {
    jobs: async_channel::Sender<EmbedJob>,
    name: Arc<str>,
    dim: usize,
    /// Recent texts' vectors (the judge's anchors and option phrases, events seen again), so
    /// the thread embeds only what it has not seen lately. Bounded: emptied when full.
    recent: Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>>,
}

/// Texts whose vectors [`MiniLmEmbedder`] keeps (about 6 MB of vectors at 384 dimensions).
const RECENT_TEXTS: usize = 4096;

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("name", &self.name)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

impl MiniLmEmbedder {
    /// Loads the model from `dir` (see [`MiniLm::load`]) and starts its thread.
    pub fn load(dir: &Path) -> Result<Self, MiniLmError> {
        Self::spawn(MiniLm::load(dir)?)
    }

    /// Starts a thread for an already loaded model.
    pub fn spawn(model: MiniLm) -> Result<Self, MiniLmError> {
        let (jobs, queue) = async_channel::unbounded::<EmbedJob>();
        let name: Arc<str> = Arc::from(model.name());
        let dim = model.dim();
        thread::Builder::new()
            .name("llm-minilm".into())
            .spawn(move || {
                while let Ok(job) = queue.recv_blocking() {
                    // A caller that stopped waiting is no error.
                    let _ = job.reply.send_blocking(model.embed(&job.texts));
                }
            })
            .map_err(|e| MiniLmError::Thread(e.to_string()))?;
        Ok(Self {
            jobs,
            name,
            dim,
            recent: Arc::default(),
        })
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The length of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The embedding of each text (see [`MiniLm::embed`]).
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut out: Vec<Option<Vec<f32>>> = {
            let recent = self
                .recent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            texts.iter().map(|t| recent.get(t).cloned()).collect()
        };
        let missing: Vec<String> = texts
            .iter()
            .zip(&out)
            .filter(|(_, known)| known.is_none())
            .map(|(t, _)| t.clone())
            .collect();
        if !missing.is_empty() {
            let (reply, answer) = async_channel::bounded(1);
            self.jobs
                .send(EmbedJob {
                    texts: missing.clone(),
                    reply,
                })
                .await
                .map_err(|_| LlmError::Closed)?;
            let vectors = answer.recv().await.map_err(|_| LlmError::Closed)?;
            if vectors.len() != missing.len() {
                return Err(LlmError::Malformed("embeddings missing".into()));
            }
            let mut recent = self
                .recent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if recent.len() + missing.len() > RECENT_TEXTS {
                recent.clear();
            }
            let mut fresh = missing.into_iter().zip(vectors);
            for slot in out.iter_mut().filter(|slot| slot.is_none()) {
                if let Some((text, vector)) = fresh.next() {
                    recent.insert(text, vector.clone());
                    *slot = Some(vector);
                }
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }
}

/// A backend whose embeddings come from MiniLM and everything else from the backend it wraps:
/// the local chat model, a scripted town that should retrieve with real embeddings, or a server
/// without an embeddings endpoint.
pub struct SentenceEmbeddings {
    inner: Arc<dyn LlmBackend>,
    embedder: MiniLmEmbedder,
    /// Whether the embedder also answers the questions it decides better than a tiny chat
    /// model ([`judge`]).
    deciding: bool,
}

impl std::fmt::Debug for SentenceEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceEmbeddings")
            .field("backend", &self.inner.name())
            .field("embedder", &self.embedder)
            .finish()
    }
}

impl SentenceEmbeddings {
    /// `inner` for chat and choices, `embedder` for embeddings.
    pub fn new(inner: Arc<dyn LlmBackend>, embedder: MiniLmEmbedder) -> Self {
        Self {
            inner,
            embedder,
            deciding: false,
        }
    }

    /// Also lets the embedder answer what it decides better than a tiny chat model
    /// ([`judge`]): poignancy ratings, where to go, yes/no calls and the wake-up hour, for
    /// requests that say what they are about. The local default does this; a capable chat model should keep its own judgement.
    pub fn deciding(mut self) -> Self {
        self.deciding = true;
        self
    }

    /// Poignancy by the anchors and the wake-up hour read off the lifestyle line, when this
    /// backend decides and the request says what it is about.
    async fn judged_chat(&self, request: &ChatRequest) -> Option<ChatResponse> {
        let about = request.about.as_deref().filter(|_| self.deciding)?;
        if judge::is_wake_up_kind(&request.kind) {
            // No times to read: the chat model answers.
            return judge::wake_up_hour(about).map(|hour| ChatResponse {
                text: hour.to_string(),
                usage: Default::default(),
            });
        }
        if !judge::is_rating_kind(&request.kind) {
            return None;
        }
        match judge::rate(&self.embedder, about).await {
            Ok(rating) => Some(ChatResponse {
                text: rating.to_string(),
                usage: Default::default(),
            }),
            // The chat model answers instead.
            Err(_) => None,
        }
    }

    /// Ratings, places and yes/no calls by the embedder, when this backend decides and the request says what
    /// it is about.
    async fn judged_choice(&self, request: &ChoiceRequest) -> Option<Vec<f32>> {
        let about = request.about.as_deref().filter(|_| self.deciding)?;
        if judge::is_rating_kind(&request.kind) {
            let rating = judge::rate(&self.embedder, about).await.ok()?;
            Some(judge::rating_option_scores(rating, &request.options))
        } else if judge::is_place_kind(&request.kind) {
            judge::place_scores(
                &self.embedder,
                &request.kind,
                about,
                &request.options,
                &request.option_phrases,
            )
            .await
            .ok()
        } else if let Some(yes_at) = judge::yes_index(&request.options) {
            judge::yes_no_scores(&self.embedder, about, yes_at)
                .await
                .ok()
        } else {
            None
        }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &Arc<dyn LlmBackend> {
        &self.inner
    }
}

impl LlmBackend for SentenceEmbeddings {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn device(&self) -> Option<&str> {
        self.inner.device()
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            match self.judged_chat(&request).await {
                Some(answer) => Ok(answer),
                None => self.inner.chat(request).await,
            }
        })
    }

    fn chat_stream(
        &self,
        request: ChatRequest,
        deltas: async_channel::Sender<String>,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        self.inner.chat_stream(request, deltas)
    }

    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        Box::pin(self.embedder.embed(texts))
    }

    fn embedding_model(&self) -> &str {
        self.embedder.name()
    }

    fn embedding_dim(&self) -> usize {
        self.embedder.dim()
    }

    fn score_choices(&self, request: ChoiceRequest) -> BoxFuture<'_, Result<Vec<f32>, LlmError>> {
        Box::pin(async move {
            match self.judged_choice(&request).await {
                Some(scores) => Ok(scores),
                None => self.inner.score_choices(request).await,
            }
        })
    }

    fn supports_choice_scoring(&self) -> bool {
        self.inner.supports_choice_scoring()
    }

    fn set_retry_hook(&self, hook: RetryHook) {
        self.inner.set_retry_hook(hook);
    }

    fn set_guess_hook(&self, hook: RetryHook) {
        self.inner.set_guess_hook(hook);
    }

    fn shut_down(&self) {
        self.inner.shut_down();
    }

    fn retries_transient_errors(&self) -> bool {
        self.inner.retries_transient_errors()
    }

    fn probe(&self) -> BoxFuture<'_, Result<(), LlmError>> {
        self.inner.probe()
    }

    fn endpoint_usage(&self) -> Vec<EndpointUsage> {
        self.inner.endpoint_usage()
    }
}

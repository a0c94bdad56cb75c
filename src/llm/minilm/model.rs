//! The BERT encoder's forward pass, `f32` on the CPU.
//!
//! **Packed batches.** The texts of a batch are not padded to a common length: their tokens are
//! stacked into one `[tokens, hidden]` matrix, so every linear layer is one large matrix product
//! (sgemm through ndarray and matrixmultiply, which picks AVX2/FMA kernels at run time) with no
//! work spent on padding, and only attention looks at one text at a time. This computes exactly
//! what a padded batch with an attention mask computes (a masked key gets zero weight; the mean
//! pooling counts only real tokens).
//!
//! The layer is BERT's: embeddings (word + position + token type 0) → LayerNorm → N × [self
//! attention → add & LayerNorm → dense → GELU (erf) → dense → add & LayerNorm], then the mean
//! of the text's token vectors, L2-normalised (sentence-transformers' pooling and `Normalize`).

use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, s};
use serde::Deserialize;

use super::safetensors::SafeTensors;

/// The encoder's sizes (`config.json`), checked against sane bounds.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub(super) struct BertConfig {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f32,
    #[serde(default = "default_act")]
    hidden_act: Act,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Act {
    Gelu,
}

fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f32 {
    1e-12
}
fn default_act() -> Act {
    Act::Gelu
}

impl BertConfig {
    /// Parses `config.json` and checks its sizes.
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let config: Self =
            serde_json::from_str(text).map_err(|e| format!("not a BERT config: {e}"))?;
        let bounded = |name: &str, value: usize, max: usize| {
            if value == 0 || value > max {
                Err(format!("{name} = {value} is outside 1..={max}"))
            } else {
                Ok(())
            }
        };
        bounded("hidden_size", config.hidden_size, 4096)?;
        bounded("num_hidden_layers", config.num_hidden_layers, 64)?;
        bounded("num_attention_heads", config.num_attention_heads, 128)?;
        bounded("intermediate_size", config.intermediate_size, 16384)?;
        bounded("vocab_size", config.vocab_size, 1 << 20)?;
        bounded(
            "max_position_embeddings",
            config.max_position_embeddings,
            8192,
        )?;
        bounded("type_vocab_size", config.type_vocab_size, 16)?;
        if !config
            .hidden_size
            .is_multiple_of(config.num_attention_heads)
        {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                config.hidden_size, config.num_attention_heads
            ));
        }
        if !(config.layer_norm_eps.is_finite() && config.layer_norm_eps > 0.0) {
            return Err("layer_norm_eps must be a positive number".into());
        }
        Ok(config)
    }
}

/// `y = x · Wᵀ + b` with `W` stored `[out, in]` as in the file.
struct Linear {
    weight: Array2<f32>,
    bias: Vec<f32>,
}

impl Linear {
    fn load(file: &mut SafeTensors, prefix: &str, out: usize, inp: usize) -> Result<Self, String> {
        let weight = file.f32_tensor(&format!("{prefix}.weight"), &[out, inp])?;
        let bias = file.f32_tensor(&format!("{prefix}.bias"), &[out])?;
        let weight = Array2::from_shape_vec((out, inp), weight).map_err(|e| e.to_string())?;
        Ok(Self { weight, bias })
    }

    /// Several linears with the same input fused into one (their outputs side by side).
    fn fuse(parts: Vec<Self>) -> Result<Self, String> {
        let views: Vec<_> = parts.iter().map(|p| p.weight.view()).collect();
        let weight = ndarray::concatenate(ndarray::Axis(0), &views).map_err(|e| e.to_string())?;
        let bias = parts.iter().flat_map(|p| p.bias.iter().copied()).collect();
        Ok(Self { weight, bias })
    }

    fn forward(&self, x: &ArrayView2<'_, f32>) -> Array2<f32> {
        let mut y = Array2::zeros((x.nrows(), self.weight.nrows()));
        general_mat_mul(1.0, x, &self.weight.t(), 0.0, &mut y);
        for mut row in y.rows_mut() {
            for (v, b) in row.iter_mut().zip(&self.bias) {
                *v += b;
            }
        }
        y
    }
}

struct LayerNorm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

impl LayerNorm {
    fn load(file: &mut SafeTensors, prefix: &str, dim: usize, eps: f32) -> Result<Self, String> {
        Ok(Self {
            weight: file.f32_tensor(&format!("{prefix}.weight"), &[dim])?,
            bias: file.f32_tensor(&format!("{prefix}.bias"), &[dim])?,
            eps,
        })
    }

    fn apply(&self, x: &mut Array2<f32>) {
        for mut row in x.rows_mut() {
            let Some(row) = row.as_slice_mut() else {
                continue;
            };
            let n = row.len() as f32;
            let mean = row.iter().sum::<f32>() / n;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(&self.weight).zip(&self.bias) {
                *v = (*v - mean) * inv * w + b;
            }
        }
    }
}

struct Layer {
    /// Query, key and value projections fused: `[3 × hidden, hidden]`.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// The loaded encoder.
pub(super) struct Bert {
    config: BertConfig,
    word: Array2<f32>,
    position: Array2<f32>,
    token_type: Vec<f32>,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
}

impl Bert {
    /// Reads every tensor the encoder needs, checking each one's name, dtype and shape.
    pub(super) fn load(file: &mut SafeTensors, config: BertConfig) -> Result<Self, String> {
        let h = config.hidden_size;
        let eps = config.layer_norm_eps;
        let table = |file: &mut SafeTensors, name: &str, rows: usize| {
            let values = file.f32_tensor(name, &[rows, h])?;
            Array2::from_shape_vec((rows, h), values).map_err(|e| e.to_string())
        };
        let word = table(file, "embeddings.word_embeddings.weight", config.vocab_size)?;
        let position = table(
            file,
            "embeddings.position_embeddings.weight",
            config.max_position_embeddings,
        )?;
        let types = table(
            file,
            "embeddings.token_type_embeddings.weight",
            config.type_vocab_size,
        )?;
        let token_type = types.row(0).to_vec();
        let embedding_norm = LayerNorm::load(file, "embeddings.LayerNorm", h, eps)?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let qkv = Linear::fuse(vec![
                Linear::load(file, &format!("{p}.attention.self.query"), h, h)?,
                Linear::load(file, &format!("{p}.attention.self.key"), h, h)?,
                Linear::load(file, &format!("{p}.attention.self.value"), h, h)?,
            ])?;
            layers.push(Layer {
                qkv,
                attention_out: Linear::load(file, &format!("{p}.attention.output.dense"), h, h)?,
                attention_norm: LayerNorm::load(
                    file,
                    &format!("{p}.attention.output.LayerNorm"),
                    h,
                    eps,
                )?,
                intermediate: Linear::load(
                    file,
                    &format!("{p}.intermediate.dense"),
                    config.intermediate_size,
                    h,
                )?,
                output: Linear::load(
                    file,
                    &format!("{p}.output.dense"),
                    h,
                    config.intermediate_size,
                )?,
                output_norm: LayerNorm::load(file, &format!("{p}.output.LayerNorm"), h, eps)?,
            });
        }
        Ok(Self {
            config,
            word,
            position,
            token_type,
            embedding_norm,
            layers,
        })
    }

    /// The sizes.
    pub(super) fn config(&self) -> &BertConfig {
        &self.config
    }

    /// The mean-pooled, L2-normalised vector of each token sequence (one packed pass). Every
    /// id must be below `vocab_size` and every sequence at most `max_position_embeddings`
    /// long and non-empty (the tokenizer guarantees both).
    pub(super) fn embed_packed(&self, sequences: &[Vec<u32>]) -> Vec<Vec<f32>> {
        let h = self.config.hidden_size;
        let total: usize = sequences.iter().map(Vec::len).sum();
        let mut x = Array2::<f32>::zeros((total, h));
        let mut row = 0;
        for ids in sequences {
            for (pos, &id) in ids.iter().enumerate() {
                let word = self.word.row(id as usize);
                let position = self.position.row(pos);
                for (j, v) in x.row_mut(row).iter_mut().enumerate() {
                    *v = word[j] + position[j] + self.token_type[j];
                }
                row += 1;
            }
        }
        self.embedding_norm.apply(&mut x);
        let longest = sequences.iter().map(Vec::len).max().unwrap_or(0);
        let mut scores = Array2::<f32>::zeros((longest, longest));
        for layer in &self.layers {
            x = self.layer(layer, x, sequences, &mut scores);
        }
        let mut out = Vec::with_capacity(sequences.len());
        let mut start = 0;
        for ids in sequences {
            let rows = x.slice(s![start..start + ids.len(), ..]);
            start += ids.len();
            let mut mean = vec![0f32; h];
            for r in rows.rows() {
                for (m, v) in mean.iter_mut().zip(r) {
                    *m += v;
                }
            }
            let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
            if norm > 0.0 {
                mean.iter_mut().for_each(|v| *v /= norm);
            }
            out.push(mean);
        }
        out
    }

    fn layer(
        &self,
        layer: &Layer,
        x: Array2<f32>,
        sequences: &[Vec<u32>],
        scores: &mut Array2<f32>,
    ) -> Array2<f32> {
        let h = self.config.hidden_size;
        let heads = self.config.num_attention_heads;
        let d = h / heads;
        let scale = 1.0 / (d as f32).sqrt();
        let qkv = layer.qkv.forward(&x.view());
        let mut context = Array2::<f32>::zeros((x.nrows(), h));
        let mut start = 0;
        for ids in sequences {
            let n = ids.len();
            let rows = start..start + n;
            start += n;
            for head in 0..heads {
                let q = qkv.slice(s![rows.clone(), head * d..(head + 1) * d]);
                let k = qkv.slice(s![rows.clone(), h + head * d..h + (head + 1) * d]);
                let v = qkv.slice(s![rows.clone(), 2 * h + head * d..2 * h + (head + 1) * d]);
                let mut sc = scores.slice_mut(s![..n, ..n]);
                general_mat_mul(scale, &q, &k.t(), 0.0, &mut sc);
                for mut r in sc.rows_mut() {
                    let max = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let mut sum = 0.0;
                    for v in r.iter_mut() {
                        *v = (*v - max).exp();
                        sum += *v;
                    }
                    r.iter_mut().for_each(|v| *v /= sum);
                }
                let sc = scores.slice(s![..n, ..n]);
                let mut ctx = context.slice_mut(s![rows.clone(), head * d..(head + 1) * d]);
                general_mat_mul(1.0, &sc, &v, 0.0, &mut ctx);
            }
        }
        let mut attended = layer.attention_out.forward(&context.view());
        attended += &x;
        layer.attention_norm.apply(&mut attended);
        let mut inner = layer.intermediate.forward(&attended.view());
        inner.mapv_inplace(gelu);
        let mut out = layer.output.forward(&inner.view());
        out += &attended;
        layer.output_norm.apply(&mut out);
        out
    }
}

/// GELU with the exact error function, as BERT's `"gelu"`.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The error function (the standard library has none on stable): the Chebyshev fit of `erfc`
/// from Numerical Recipes (`erfcc`), fractional error below 1.2e-7 everywhere, plenty for `f32`
/// activations.
fn erf(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_204
                                + t * (1.488_515_9 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 { 1.0 - erfc } else { erfc - 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // erf at a few points (from tables), and its symmetry.
        for (x, expected) in [
            (0.0f32, 0.0f32),
            (0.1, 0.112_462_92),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
            (3.5, 0.999_999_3),
        ] {
            assert!((erf(x) - expected).abs() < 1e-6, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + expected).abs() < 1e-6);
        }
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
        assert_eq!(erf(f32::INFINITY), 1.0);
    }

    #[test]
    fn configs_out_of_bounds_are_refused() {
        let good = r#"{"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
            "intermediate_size": 1536, "vocab_size": 30522, "max_position_embeddings": 512,
            "hidden_act": "gelu", "model_type": "bert"}"#;
        let config = BertConfig::parse(good).expect("the real sizes");
        assert_eq!((config.hidden_size, config.type_vocab_size), (384, 2));
        for bad in [
            good.replace("\"num_attention_heads\": 12", "\"num_attention_heads\": 7"),
            good.replace("384", "0"),
            good.replace("30522", "99999999999"),
            good.replace("\"gelu\"", "\"relu\""),
            good.replace("\"hidden_size\": 384,", ""),
        ] {
            assert!(BertConfig::parse(&bad).is_err(), "{bad}");
        }
    }
}

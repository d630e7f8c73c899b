"""Write a weight-less model folder shaped like olmOCR 2 (allenai/olmOCR-2-7B-1025-FP8, a
Qwen2.5-VL-7B fine-tune), for vLLM's ``load_format='dummy'``.

The tokenizer and chat template come from ../shared/device/make_synthetic_vlm.py (run
first, into the same folder; Qwen2.5-VL and Qwen3-VL share Qwen2's tokenizer and special
token ids); this script then puts Qwen2.5-VL-7B's architecture and image processor in
place of Qwen3-VL-8B's: 28 decoder layers of 3584, 4 KV heads, a 32-block vision encoder
with 14 px patches and windowed attention. Throughput on it is real engine work on the
real model's shapes; its text is noise.

The weights are bfloat16 here: the FP8 of the real checkpoint is given to vLLM as
``--quantization fp8`` (bench/engine_limit.py lists it with its reason).

    python3 .device-carry/make_synthetic_vlm.py /tmp/synthetic-qwen25vl
    python3 bench/synthetic_qwen25vl.py /tmp/synthetic-qwen25vl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CONFIG = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "bos_token_id": 151643, "eos_token_id": 151645,
    "vision_start_token_id": 151652, "vision_end_token_id": 151653,
    "vision_token_id": 151654, "image_token_id": 151655, "video_token_id": 151656,
    "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944,
    "initializer_range": 0.02, "max_position_embeddings": 128000, "max_window_layers": 28,
    "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "sliding_window": 32768,
    "use_sliding_window": False, "tie_word_embeddings": False, "use_cache": True,
    "attention_dropout": 0.0, "vocab_size": 152064,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {
        "model_type": "qwen2_5_vl", "depth": 32, "hidden_act": "silu", "hidden_size": 1280,
        "intermediate_size": 3420, "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584,
        "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
        "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2, "temporal_patch_size": 2,
    },
    "torch_dtype": "bfloat16",
}

# Qwen2.5-VL's image processor: 14 px patches merged 2x2 (one token per 28x28 pixels),
# CLIP's normalisation, its default pixel bounds (folio's olmocr2 preset sends its own)
PREPROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor",
    "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
    "min_pixels": 3136, "max_pixels": 12845056,
    "size": {"shortest_edge": 3136, "longest_edge": 12845056},
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
    "rescale_factor": 0.00392156862745098, "resample": 3,
}


def main(out: Path) -> None:
    if not (out / "tokenizer.json").is_file():
        raise SystemExit(f"{out}: run make_synthetic_vlm.py {out} first (the tokenizer)")
    (out / "config.json").write_text(json.dumps(CONFIG, indent=1))
    (out / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=1))
    video = {k: v for k, v in PREPROCESSOR.items() if k != "image_processor_type"}
    video["video_processor_type"] = "Qwen2VLVideoProcessor"
    (out / "video_preprocessor_config.json").write_text(json.dumps(video, indent=1))
    print("wrote", out, "(Qwen2.5-VL-7B shape)")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/synthetic-qwen25vl"))

"""The FaceFusion models the worker image carries, per option that names one: the one list of them.

The image's build downloads FaceFusion 3.8.1's models for DOWNLOAD_SCOPE and then checks the models
folder against this list, model by model (gpu_worker/engines/facefusion/image_models_check.py), so the
build fails when the two differ. Validation (the slicer and `fusionfleet swap`) refuses a job that names
a model outside it, instead of letting three attempts fail on a worker that has no way to fetch it.
"lite" carries every model except most of the deep swapper's (24 of its 157 identities).

Standard library only: the image's build reads this file by path, before the project is installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# FaceFusion's `force-download --download-scope`.
DOWNLOAD_SCOPE = "lite"
# A choice that is not one model but all of the option's models ("many" detectors, landmarkers, occluders).
ALL_OF_THEM = "many"

IMAGE_MODELS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "face_detector_model": ("many", "retinaface", "scrfd", "yolo_face", "yunet"),
        "face_landmarker_model": ("many", "2dfan4", "peppa_wutz"),
        "face_occluder_model": ("many", "xseg_1", "xseg_2", "xseg_3"),
        "face_parser_model": ("bisenet_resnet_18", "bisenet_resnet_34"),
        "voice_extractor_model": ("kim_vocal_1", "kim_vocal_2", "uvr_mdxnet"),
        "age_modifier_model": ("fran", "styleganex_age"),
        "background_remover_model": (
            "ben_2",
            "birefnet_general",
            "birefnet_portrait",
            "corridor_key_1024",
            "corridor_key_2048",
            "isnet_general",
            "modnet",
            "ormbg",
            "rmbg_1.4",
            "rmbg_2.0",
            "silueta",
            "u2net_cloth",
            "u2net_general",
            "u2net_human",
            "u2netp",
        ),
        "deep_swapper_model": (
            "iperov/alexandra_daddario_224",
            "iperov/alexei_navalny_224",
            "iperov/amber_heard_224",
            "iperov/dilraba_dilmurat_224",
            "iperov/elon_musk_224",
            "iperov/emilia_clarke_224",
            "iperov/emma_watson_224",
            "iperov/erin_moriarty_224",
            "iperov/jackie_chan_224",
            "iperov/james_carrey_224",
            "iperov/jason_statham_320",
            "iperov/keanu_reeves_320",
            "iperov/margot_robbie_224",
            "iperov/natalie_dormer_224",
            "iperov/nicolas_coppola_224",
            "iperov/robert_downey_224",
            "iperov/rowan_atkinson_224",
            "iperov/ryan_reynolds_224",
            "iperov/scarlett_johansson_224",
            "iperov/sylvester_stallone_224",
            "iperov/thomas_cruise_224",
            "iperov/thomas_holland_224",
            "iperov/vin_diesel_224",
            "iperov/vladimir_putin_224",
        ),
        "expression_restorer_model": ("live_portrait",),
        "face_editor_model": ("live_portrait",),
        "face_enhancer_model": (
            "codeformer",
            "gfpgan_1.2",
            "gfpgan_1.3",
            "gfpgan_1.4",
            "gpen_bfr_256",
            "gpen_bfr_512",
            "gpen_bfr_1024",
            "gpen_bfr_2048",
            "restoreformer_plus_plus",
        ),
        "face_swapper_model": (
            "blendswap_256",
            "ghost_1_256",
            "ghost_2_256",
            "ghost_3_256",
            "hififace_unofficial_256",
            "hyperswap_1a_256",
            "hyperswap_1b_256",
            "hyperswap_1c_256",
            "inswapper_128",
            "inswapper_128_fp16",
            "simswap_256",
            "simswap_unofficial_512",
            "uniface_256",
        ),
        "frame_colorizer_model": ("ddcolor", "ddcolor_artistic", "deoldify", "deoldify_artistic", "deoldify_stable"),
        "frame_enhancer_model": (
            "clear_reality_x4",
            "face_dat_x4",
            "nomos8k_sc_x4",
            "real_esrgan_x2",
            "real_esrgan_x2_fp16",
            "real_esrgan_x4",
            "real_esrgan_x4_fp16",
            "real_esrgan_x8",
            "real_esrgan_x8_fp16",
            "real_hatgan_x4",
            "real_web_photo_x4",
            "realistic_rescaler_x4",
            "remacri_x4",
            "siax_x4",
            "span_kendata_x4",
            "swin2_sr_x4",
            "tghq_face_x8",
            "ultra_sharp_x4",
            "ultra_sharp_2_x4",
        ),
        "lip_syncer_model": ("edtalk_256", "wav2lip_96", "wav2lip_gan_96"),
    }
)


def image_model_problems(options: Mapping[str, object]) -> list[str]:
    """One sentence per option naming a model the worker image does not carry."""
    problems = []
    for name, value in options.items():
        carried = IMAGE_MODELS.get(name)
        if carried is None or not isinstance(value, str) or value in carried:
            continue
        problems.append(
            f"options.{name}: the worker image does not carry the model {value!r} (workers cannot download "
            f"models); it carries {', '.join(carried)}"
        )
    return problems

"""The FaceFusion 3.8.1 processing options a job manifest may carry: the catalogue, as data.

A manifest's ``options`` object uses FaceFusion's own names: its CLI flags without the leading ``--``
and with ``-`` turned into ``_``. One catalogue serves three users: manifest validation, the
command-line flags (``fusionfleet.facefusion.flags``, which offers every option as a
``--face-selector-mode many`` style flag) and the FaceFusion engine (which turns validated options
one-to-one into ``headless-run`` argv). The rules that read it live in ``fusionfleet.facefusion.options``.

The catalogue is written from FaceFusion 3.8.1's ``program.py``, ``choices.py``, ``types.py`` and each
processor module's ``choices.py``/``register_args``. Where FaceFusion works its choices out at run
time (encoders the local ffmpeg offers, the processor module folder, detector sizes and pixel boosts
that depend on the chosen model, custom deep swapper models found on disk) the static lists from its
source are used, and the model-dependent ones are cross-checked in ``DEPENDENT_CHOICES``.

Pure data: no I/O and no FaceFusion import, so the slicer Lambda and the CLI can use it without
FaceFusion installed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeAlias

FACEFUSION_VERSION = "3.8.1"

Kind: TypeAlias = Literal["str", "int", "float"]
Choice: TypeAlias = str | int | float


@dataclass(frozen=True)
class OptionSpec:
    """One FaceFusion option a job may set."""

    name: str
    kind: Kind
    multiple: bool = False
    choices: tuple[Choice, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    group: str = ""
    help: str = ""
    # FaceFusion's ranges are grids (create_int_range/create_float_range) that argparse checks
    # with `in`, so 0.33 is refused where the step is 0.05: the step is part of the range.
    step: float | None = None
    # Margins, paddings and colours take 1..4 values; FaceFusion drops a fifth silently (None).
    max_values: int | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class DependentChoices:
    """Choices of one option that FaceFusion derives from the model another option picks."""

    model_option: str
    default_model: str  # FaceFusion's built-in default when the job leaves the model unset
    by_model: Mapping[str, tuple[str, ...]]


# --- builders, so the table below reads as data -------------------------------------------------


def _choice(name: str, group: str, choices: Sequence[str], help: str, *, multiple: bool = False) -> OptionSpec:
    return OptionSpec(name, "str", multiple=multiple, choices=tuple(choices), group=group, help=help)


def _int(
    name: str,
    group: str,
    help: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    step: int | None = None,
    choices: Sequence[int] | None = None,
    multiple: bool = False,
    max_values: int | None = None,
) -> OptionSpec:
    return OptionSpec(
        name,
        "int",
        multiple=multiple,
        choices=None if choices is None else tuple(choices),
        minimum=minimum,
        maximum=maximum,
        group=group,
        help=help,
        step=step,
        max_values=max_values,
    )


def _float(
    name: str,
    group: str,
    help: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    step: float | None = None,
) -> OptionSpec:
    return OptionSpec(name, "float", minimum=minimum, maximum=maximum, group=group, help=help, step=step)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _prefixed(prefix: str, names: str) -> tuple[str, ...]:
    return tuple(f"{prefix}/{name}" for name in names.split())


# --- FaceFusion 3.8.1 choice lists ---------------------------------------------------------------

_FACE_DETECTOR_SIZES = {
    "many": ("640x640",),
    "retinaface": ("160x160", "320x320", "480x480", "512x512", "640x640"),
    "scrfd": ("160x160", "320x320", "480x480", "512x512", "640x640"),
    "yolo_face": ("640x640",),
    "yunet": ("640x640",),
}
_PIXEL_BOOST_256 = ("256x256", "512x512", "768x768", "1024x1024")
_PIXEL_BOOST_128 = ("128x128", "256x256", "384x384", "512x512", "768x768", "1024x1024")
_FACE_SWAPPER_PIXEL_BOOSTS = {
    "blendswap_256": ("256x256", "384x384", "512x512", "768x768", "1024x1024"),
    "ghost_1_256": _PIXEL_BOOST_256,
    "ghost_2_256": _PIXEL_BOOST_256,
    "ghost_3_256": _PIXEL_BOOST_256,
    "hififace_unofficial_256": _PIXEL_BOOST_256,
    "hyperswap_1a_256": _PIXEL_BOOST_256,
    "hyperswap_1b_256": _PIXEL_BOOST_256,
    "hyperswap_1c_256": _PIXEL_BOOST_256,
    "inswapper_128": _PIXEL_BOOST_128,
    "inswapper_128_fp16": _PIXEL_BOOST_128,
    "simswap_256": _PIXEL_BOOST_256,
    "simswap_unofficial_512": ("512x512", "768x768", "1024x1024"),
    "uniface_256": _PIXEL_BOOST_256,
}


def _union(lists: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    """All sizes any model accepts, smallest first (they are all square WxH strings)."""
    sizes = {size for sizes in lists for size in sizes}
    return tuple(sorted(sizes, key=lambda size: int(size.split("x")[0])))


# The processor module folder names, alphabetical as FaceFusion lists the folder.
_PROCESSORS = _words(
    "age_modifier background_remover deep_swapper expression_restorer face_debugger face_editor "
    "face_enhancer face_swapper frame_colorizer frame_enhancer lip_syncer"
)

# FaceFusion also appends 'custom/<file>' for models dropped into .assets/models/custom on the
# machine it runs on; the workers ship none, so only the published models are accepted.
_DEEP_SWAPPER_MODELS = (
    *_prefixed(
        "druuzil",
        "adam_levine_320 adrianne_palicki_384 agnetha_falskog_224 alan_ritchson_320 alicia_vikander_320"
        " amber_midthunder_320 andras_arato_384 andrew_tate_320 angelina_jolie_384 anne_hathaway_320"
        " anya_chalotra_320 arnold_schwarzenegger_320 benjamin_affleck_320 benjamin_stiller_384"
        " bradley_pitt_224 brie_larson_384 bruce_campbell_384 bryan_cranston_320 catherine_blanchett_352"
        " christian_bale_320 christopher_hemsworth_320 christoph_waltz_384 cillian_murphy_320"
        " cobie_smulders_256 dwayne_johnson_384 edward_norton_320 elisabeth_shue_320 elizabeth_olsen_384"
        " elon_musk_320 emily_blunt_320 emma_stone_384 emma_watson_320 erin_moriarty_384 eva_green_320"
        " ewan_mcgregor_320 florence_pugh_320 freya_allan_320 gary_cole_224 gigi_hadid_224"
        " harrison_ford_384 hayden_christensen_320 heath_ledger_320 henry_cavill_448 hugh_jackman_384"
        " idris_elba_320 jack_nicholson_320 james_carrey_384 james_mcavoy_320 james_varney_320"
        " jason_momoa_320 jason_statham_320 jennifer_connelly_384 jimmy_donaldson_320 jordan_peterson_384"
        " karl_urban_224 kate_beckinsale_384 laurence_fishburne_384 lili_reinhart_320 luke_evans_384"
        " mads_mikkelsen_384 mary_winstead_320 margaret_qualley_384 melina_juergens_320"
        " michael_fassbender_320 michael_fox_320 millie_bobby_brown_320 morgan_freeman_320"
        " patrick_stewart_224 rachel_weisz_384 rebecca_ferguson_320 scarlett_johansson_320"
        " shannen_doherty_384 seth_macfarlane_384 thomas_cruise_320 thomas_hanks_384 william_murray_384"
        " zoe_saldana_384",
    ),
    *_prefixed(
        "edel",
        "emma_roberts_224 ivanka_trump_224 lize_dzjabrailova_224 sidney_sweeney_224 winona_ryder_224",
    ),
    *_prefixed(
        "iperov",
        "alexandra_daddario_224 alexei_navalny_224 amber_heard_224 dilraba_dilmurat_224 elon_musk_224"
        " emilia_clarke_224 emma_watson_224 erin_moriarty_224 jackie_chan_224 james_carrey_224"
        " jason_statham_320 keanu_reeves_320 margot_robbie_224 natalie_dormer_224 nicolas_coppola_224"
        " robert_downey_224 rowan_atkinson_224 ryan_reynolds_224 scarlett_johansson_224"
        " sylvester_stallone_224 thomas_cruise_224 thomas_holland_224 vin_diesel_224 vladimir_putin_224",
    ),
    *_prefixed(
        "jen",
        "angelica_trae_288 ella_freya_224 emma_myers_320 evie_pickerill_224 kang_hyewon_320"
        " maddie_mead_224 nicole_turnbull_288",
    ),
    *_prefixed(
        "mats",
        "alica_schmidt_320 ashley_alexiss_224 billie_eilish_224 brie_larson_224 cara_delevingne_224"
        " carolin_kebekus_224 chelsea_clinton_224 claire_boucher_224 corinna_kopf_224 florence_pugh_224"
        " hillary_clinton_224 jenna_fischer_224 kim_jisoo_320 mica_suarez_320 shailene_woodley_224"
        " shraddha_kapoor_320 yu_jimin_352",
    ),
    *_prefixed(
        "rumateus",
        "alison_brie_224 amber_heard_224 angelina_jolie_224 aubrey_plaza_224 bridget_regan_224"
        " cobie_smulders_224 deborah_woll_224 dua_lipa_224 emma_stone_224 hailee_steinfeld_224"
        " hilary_duff_224 jessica_alba_224 jessica_biel_224 john_cena_224 kim_kardashian_224"
        " kristen_bell_224 lucy_liu_224 margot_robbie_224 megan_fox_224 meghan_markle_224"
        " millie_bobby_brown_224 natalie_portman_224 nicki_minaj_224 olivia_wilde_224 shay_mitchell_224"
        " sophie_turner_224 taylor_swift_224",
    ),
)

_FACE_EDITOR_MOTIONS = (
    ("eyebrow_direction", "eyebrow direction"),
    ("eye_gaze_horizontal", "horizontal eye gaze"),
    ("eye_gaze_vertical", "vertical eye gaze"),
    ("eye_open_ratio", "how far the eyes open"),
    ("lip_open_ratio", "how far the lips open"),
    ("mouth_grim", "mouth grim"),
    ("mouth_pout", "mouth pout"),
    ("mouth_purse", "mouth purse"),
    ("mouth_smile", "mouth smile"),
    ("mouth_position_horizontal", "horizontal mouth position"),
    ("mouth_position_vertical", "vertical mouth position"),
    ("head_pitch", "head pitch"),
    ("head_yaw", "head yaw"),
    ("head_roll", "head roll"),
)


# --- the catalogue, in FaceFusion's own order (the order headless-run argv is written in) ----------

_SPECS: tuple[OptionSpec, ...] = (
    # face detector
    _choice(
        "face_detector_model",
        "face detector",
        _words("many retinaface scrfd yolo_face yunet"),
        "model that detects the faces",
    ),
    _choice(
        "face_detector_size",
        "face detector",
        _union(_FACE_DETECTOR_SIZES.values()),
        "frame size fed to the face detector (depends on the model)",
    ),
    _int(
        "face_detector_margin",
        "face detector",
        "top, right, bottom, left margin added to the frame, in percent (1 to 4 values)",
        minimum=0,
        maximum=100,
        step=1,
        multiple=True,
        max_values=4,
    ),
    _int(
        "face_detector_angles",
        "face detector",
        "angles the frame is rotated by before detecting faces",
        choices=(0, 90, 180, 270),
        multiple=True,
    ),
    _float(
        "face_detector_score",
        "face detector",
        "minimum detection confidence",
        minimum=0.0,
        maximum=1.0,
        step=0.05,
    ),
    # face landmarker
    _choice(
        "face_landmarker_model",
        "face landmarker",
        _words("many 2dfan4 peppa_wutz"),
        "model that finds the face landmarks",
    ),
    _float(
        "face_landmarker_score",
        "face landmarker",
        "minimum landmark confidence",
        minimum=0.0,
        maximum=1.0,
        step=0.05,
    ),
    # face selector
    _choice(
        "face_selector_mode",
        "face selector",
        _words("many one reference"),
        "process every face, one face, or faces similar to a reference face",
    ),
    _choice(
        "face_selector_order",
        "face selector",
        _words("left-right right-left top-bottom bottom-top small-large large-small best-worst worst-best"),
        "order of the detected faces",
    ),
    _int(
        "face_selector_age_start",
        "face selector",
        "keep faces from this age (set together with face_selector_age_end)",
        minimum=0,
        maximum=100,
        step=1,
    ),
    _int(
        "face_selector_age_end",
        "face selector",
        "keep faces below this age (set together with face_selector_age_start)",
        minimum=0,
        maximum=100,
        step=1,
    ),
    _choice(
        "face_selector_gender",
        "face selector",
        _words("auto female male"),
        "keep faces of this gender",
    ),
    _choice(
        "face_selector_race",
        "face selector",
        _words("auto white black latino asian indian arabic"),
        "keep faces of this race",
    ),
    # FaceFusion has no range here; a negative position would index faces from the end.
    _int(
        "reference_face_position",
        "face selector",
        "position of the face, in selector order, that becomes the reference face",
        minimum=0,
    ),
    _float(
        "reference_face_distance",
        "face selector",
        "how similar a face must be to the reference face (lower is stricter)",
        minimum=0.0,
        maximum=1.0,
        step=0.05,
    ),
    _int(
        "reference_frame_number",
        "face selector",
        "frame of the target the reference face is taken from",
        minimum=0,
    ),
    # face tracker
    _float(
        "face_tracker_score",
        "face tracker",
        "overlap score for matching tracked faces between frames",
        minimum=0.0,
        maximum=0.5,
        step=0.05,
    ),
    # face masker
    _choice(
        "face_occluder_model",
        "face masker",
        _words("many xseg_1 xseg_2 xseg_3"),
        "model for the occlusion mask",
    ),
    _choice(
        "face_parser_model",
        "face masker",
        _words("bisenet_resnet_18 bisenet_resnet_34"),
        "model for the region mask",
    ),
    _choice(
        "face_mask_types",
        "face masker",
        _words("box occlusion area region"),
        "face mask types to combine",
        multiple=True,
    ),
    _choice(
        "face_mask_areas",
        "face masker",
        _words("upper-face lower-face mouth"),
        "areas used by the area mask",
        multiple=True,
    ),
    _choice(
        "face_mask_regions",
        "face masker",
        _words("skin left-eyebrow right-eyebrow left-eye right-eye glasses nose mouth upper-lip lower-lip"),
        "regions used by the region mask",
        multiple=True,
    ),
    _float(
        "face_mask_blur",
        "face masker",
        "blur applied to the box mask",
        minimum=0.0,
        maximum=1.0,
        step=0.05,
    ),
    _int(
        "face_mask_padding",
        "face masker",
        "top, right, bottom, left padding of the box mask, in percent (1 to 4 values)",
        minimum=0,
        maximum=100,
        step=1,
        multiple=True,
        max_values=4,
    ),
    # voice extractor
    _choice(
        "voice_extractor_model",
        "voice extractor",
        _words("kim_vocal_1 kim_vocal_2 uvr_mdxnet"),
        "model that extracts the voice from the source audio",
    ),
    # frame extraction: the range of the target rendered, [start, end) (the planner plans only it)
    _int(
        "trim_frame_start",
        "frame extraction",
        "first frame of the target to render (default: its first)",
        minimum=0,
    ),
    _int(
        "trim_frame_end",
        "frame extraction",
        "frame of the target to stop before (default: its end)",
        minimum=0,
    ),
    _choice(
        "temp_frame_format",
        "frame extraction",
        _words("bmp jpeg png tiff"),
        "format of the temporary frames",
    ),
    _choice(
        "temp_pixel_format",
        "frame extraction",
        _words("bgr24 bgra"),
        "pixel format of the temporary frames",
    ),
    # frame distribution
    _int(
        "target_frame_amount",
        "frame distribution",
        "number of target frames handed to each processor call",
        minimum=0,
        maximum=10,
        step=1,
    ),
    # output creation
    _int(
        "output_image_quality",
        "output creation",
        "image quality (compression)",
        minimum=0,
        maximum=100,
        step=1,
    ),
    _float(
        "output_image_scale",
        "output creation",
        "image scale relative to the target image",
        minimum=0.25,
        maximum=8.0,
        step=0.25,
    ),
    # Encoders: FaceFusion offers the subset its ffmpeg has; this is the full AudioEncoder list.
    _choice(
        "output_audio_encoder",
        "output creation",
        _words("flac aac libmp3lame libopus libvorbis pcm_s16le pcm_s32le"),
        "audio encoder",
    ),
    _int(
        "output_audio_quality",
        "output creation",
        "audio quality (compression)",
        minimum=0,
        maximum=100,
        step=1,
    ),
    _int(
        "output_audio_volume",
        "output creation",
        "audio volume relative to the target, in percent",
        minimum=0,
        maximum=100,
        step=1,
    ),
    _choice(
        "output_video_encoder",
        "output creation",
        _words(
            "libx264 libx264rgb libx265 libvpx-vp9 h264_nvenc hevc_nvenc h264_amf hevc_amf h264_qsv"
            " hevc_qsv h264_videotoolbox hevc_videotoolbox rawvideo"
        ),
        "video encoder",
    ),
    _choice(
        "output_video_preset",
        "output creation",
        _words("ultrafast superfast veryfast faster fast medium slow slower veryslow"),
        "encoder preset: speed against file size",
    ),
    _int(
        "output_video_quality",
        "output creation",
        "video quality (compression)",
        minimum=0,
        maximum=100,
        step=1,
    ),
    _float(
        "output_video_scale",
        "output creation",
        "video scale relative to the target video",
        minimum=0.25,
        maximum=8.0,
        step=0.25,
    ),
    # No argparse range, but FaceFusion clamps the fps to 1..60 (normalize_fps) and treats 0 as
    # unset; refusing is clearer than a silent clamp. The planner and the merge apply it
    # (fusionfleet.jobs.timeline), as FaceFusion's writer does.
    _float(
        "output_video_fps",
        "output creation",
        "output frame rate (default: the target's)",
        minimum=1.0,
        maximum=60.0,
    ),
    # workflow
    _choice(
        "workflow_mode",
        "workflow",
        _words("auto image-to-image image-to-video"),
        "detect or force the workflow",
    ),
    _choice(
        "workflow_strategy",
        "workflow",
        _words("disk memory"),
        "keep the temporary frames in memory or on disk",
    ),
    # processors
    _choice(
        "processors",
        "processors",
        _PROCESSORS,
        "processors to run, in order",
        multiple=True,
    ),
    # age modifier
    _choice("age_modifier_model", "age modifier", _words("fran styleganex_age"), "model that ages the face"),
    _int(
        "age_modifier_direction",
        "age modifier",
        "make the face younger (negative) or older (positive)",
        minimum=-100,
        maximum=100,
        step=1,
    ),
    # background remover
    _choice(
        "background_remover_model",
        "background remover",
        _words(
            "ben_2 birefnet_general birefnet_portrait corridor_key_1024 corridor_key_2048 isnet_general"
            " modnet ormbg rmbg_1.4 rmbg_2.0 silueta u2net_cloth u2net_general u2net_human u2netp"
        ),
        "model that removes the background",
    ),
    _int(
        "background_remover_fill_color",
        "background remover",
        "red, green, blue, alpha of the new background, 0..255 (1 to 4 values)",
        minimum=0,
        maximum=255,
        step=1,
        multiple=True,
        max_values=4,
    ),
    _int(
        "background_remover_despill_color",
        "background remover",
        "red, green, blue, alpha removed from the foreground edges, 0..255 (1 to 4 values)",
        minimum=0,
        maximum=255,
        step=1,
        multiple=True,
        max_values=4,
    ),
    # deep swapper
    _choice("deep_swapper_model", "deep swapper", _DEEP_SWAPPER_MODELS, "model (one identity) to swap in"),
    _int(
        "deep_swapper_morph",
        "deep swapper",
        "morph between the source and the target face",
        minimum=0,
        maximum=100,
        step=1,
    ),
    # expression restorer
    _choice(
        "expression_restorer_model",
        "expression restorer",
        _words("live_portrait"),
        "model that restores the expression",
    ),
    _int(
        "expression_restorer_factor",
        "expression restorer",
        "how much of the target face's expression to restore",
        minimum=0,
        maximum=100,
        step=1,
    ),
    _choice(
        "expression_restorer_areas",
        "expression restorer",
        _words("upper-face lower-face"),
        "face areas whose expression is restored",
        multiple=True,
    ),
    # face debugger
    _choice(
        "face_debugger_items",
        "face debugger",
        _words("bounding-box face-landmark-5 face-landmark-5/68 face-landmark-68 face-landmark-68/5 face-mask"),
        "overlays to draw",
        multiple=True,
    ),
    # face editor
    _choice("face_editor_model", "face editor", _words("live_portrait"), "model that edits the face"),
    *(
        _float(
            f"face_editor_{motion}",
            "face editor",
            description,
            minimum=-1.0,
            maximum=1.0,
            step=0.05,
        )
        for motion, description in _FACE_EDITOR_MOTIONS
    ),
    # face enhancer
    _choice(
        "face_enhancer_model",
        "face enhancer",
        _words(
            "codeformer gfpgan_1.2 gfpgan_1.3 gfpgan_1.4 gpen_bfr_256 gpen_bfr_512 gpen_bfr_1024"
            " gpen_bfr_2048 restoreformer_plus_plus"
        ),
        "model that enhances the face",
    ),
    _int(
        "face_enhancer_blend",
        "face enhancer",
        "blend of the enhanced face into the previous one",
        minimum=0,
        maximum=100,
        step=1,
    ),
    _float(
        "face_enhancer_weight",
        "face enhancer",
        "weight applied to the face (used by codeformer)",
        minimum=0.0,
        maximum=1.0,
        step=0.05,
    ),
    # face swapper
    _choice(
        "face_swapper_model",
        "face swapper",
        tuple(_FACE_SWAPPER_PIXEL_BOOSTS),
        "model that swaps the face",
    ),
    _choice(
        "face_swapper_pixel_boost",
        "face swapper",
        _union(_FACE_SWAPPER_PIXEL_BOOSTS.values()),
        "resolution the face is swapped at (depends on the model)",
    ),
    _float(
        "face_swapper_weight",
        "face swapper",
        "weight applied to the face",
        minimum=0.0,
        maximum=1.0,
        step=0.05,
    ),
    # frame colorizer
    _choice(
        "frame_colorizer_model",
        "frame colorizer",
        _words("ddcolor ddcolor_artistic deoldify deoldify_artistic deoldify_stable"),
        "model that colorizes the frame",
    ),
    _choice(
        "frame_colorizer_size",
        "frame colorizer",
        _words("192x192 256x256 384x384 512x512"),
        "frame size fed to the frame colorizer",
    ),
    _int(
        "frame_colorizer_blend",
        "frame colorizer",
        "blend of the colorized frame into the previous one",
        minimum=0,
        maximum=100,
        step=1,
    ),
    # frame enhancer
    _choice(
        "frame_enhancer_model",
        "frame enhancer",
        _words(
            "clear_reality_x4 face_dat_x4 nomos8k_sc_x4 real_esrgan_x2 real_esrgan_x2_fp16 real_esrgan_x4"
            " real_esrgan_x4_fp16 real_esrgan_x8 real_esrgan_x8_fp16 real_hatgan_x4 real_web_photo_x4"
            " realistic_rescaler_x4 remacri_x4 siax_x4 span_kendata_x4 swin2_sr_x4 tghq_face_x8"
            " ultra_sharp_x4 ultra_sharp_2_x4"
        ),
        "model that enhances (upscales) the frame",
    ),
    _int(
        "frame_enhancer_blend",
        "frame enhancer",
        "blend of the enhanced frame into the previous one",
        minimum=0,
        maximum=100,
        step=1,
    ),
    # lip syncer
    _choice(
        "lip_syncer_model",
        "lip syncer",
        _words("edtalk_256 wav2lip_96 wav2lip_gan_96"),
        "model that syncs the lips to the source audio",
    ),
    _float(
        "lip_syncer_weight",
        "lip syncer",
        "weight applied to the lips",
        minimum=0.0,
        maximum=1.0,
        step=0.05,
    ),
)

CATALOGUE: Mapping[str, OptionSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})

# FaceFusion 3.8.1's own default of each option (None: it has none: the option is off, or the target's
# own value is kept), what a job that leaves it unset gets; the flags' help shows them. Two follow the
# machine in FaceFusion: the detector size is the default model's largest, the encoders the first its
# ffmpeg offers (these are the worker image's). tests/integration/engines/test_facefusion_defaults.py
# holds them to FaceFusion's own parser.
DEFAULTS: Mapping[str, Choice | tuple[Choice, ...] | None] = MappingProxyType(
    {
        "face_detector_model": "yolo_face",
        "face_detector_size": "640x640",
        "face_detector_margin": (0, 0, 0, 0),
        "face_detector_angles": (0,),
        "face_detector_score": 0.5,
        "face_landmarker_model": "2dfan4",
        "face_landmarker_score": 0.5,
        "face_selector_mode": "reference",
        "face_selector_order": "large-small",
        "face_selector_age_start": None,
        "face_selector_age_end": None,
        "face_selector_gender": None,
        "face_selector_race": None,
        "reference_face_position": 0,
        "reference_face_distance": 0.3,
        "reference_frame_number": 0,
        "face_tracker_score": 0.0,
        "face_occluder_model": "xseg_1",
        "face_parser_model": "bisenet_resnet_34",
        "face_mask_types": ("box",),
        "face_mask_areas": ("upper-face", "lower-face", "mouth"),
        "face_mask_regions": (
            "skin",
            "left-eyebrow",
            "right-eyebrow",
            "left-eye",
            "right-eye",
            "glasses",
            "nose",
            "mouth",
            "upper-lip",
            "lower-lip",
        ),
        "face_mask_blur": 0.3,
        "face_mask_padding": (0, 0, 0, 0),
        "voice_extractor_model": "kim_vocal_2",
        "trim_frame_start": None,
        "trim_frame_end": None,
        "temp_frame_format": "png",
        "temp_pixel_format": "bgr24",
        "target_frame_amount": 2,
        "output_image_quality": 80,
        "output_image_scale": 1.0,
        "output_audio_encoder": "flac",
        "output_audio_quality": 80,
        "output_audio_volume": 100,
        "output_video_encoder": "libx264",
        "output_video_preset": "veryfast",
        "output_video_quality": 80,
        "output_video_scale": 1.0,
        "output_video_fps": None,
        "workflow_mode": "auto",
        "workflow_strategy": "memory",
        "processors": ("face_swapper",),
        "age_modifier_model": "fran",
        "age_modifier_direction": 0,
        "background_remover_model": "modnet",
        "background_remover_fill_color": (0, 0, 0, 0),
        "background_remover_despill_color": (0, 0, 0, 0),
        "deep_swapper_model": "iperov/elon_musk_224",
        "deep_swapper_morph": 100,
        "expression_restorer_model": "live_portrait",
        "expression_restorer_factor": 80,
        "expression_restorer_areas": ("upper-face", "lower-face"),
        "face_debugger_items": ("face-landmark-5/68", "face-mask"),
        "face_editor_model": "live_portrait",
        "face_editor_eyebrow_direction": 0.0,
        "face_editor_eye_gaze_horizontal": 0.0,
        "face_editor_eye_gaze_vertical": 0.0,
        "face_editor_eye_open_ratio": 0.0,
        "face_editor_lip_open_ratio": 0.0,
        "face_editor_mouth_grim": 0.0,
        "face_editor_mouth_pout": 0.0,
        "face_editor_mouth_purse": 0.0,
        "face_editor_mouth_smile": 0.0,
        "face_editor_mouth_position_horizontal": 0.0,
        "face_editor_mouth_position_vertical": 0.0,
        "face_editor_head_pitch": 0.0,
        "face_editor_head_yaw": 0.0,
        "face_editor_head_roll": 0.0,
        "face_enhancer_model": "gfpgan_1.4",
        "face_enhancer_blend": 80,
        "face_enhancer_weight": 0.5,
        "face_swapper_model": "hyperswap_1a_256",
        "face_swapper_pixel_boost": "256x256",
        "face_swapper_weight": 0.5,
        "frame_colorizer_model": "ddcolor",
        "frame_colorizer_size": "256x256",
        "frame_colorizer_blend": 100,
        "frame_enhancer_model": "span_kendata_x4",
        "frame_enhancer_blend": 80,
        "lip_syncer_model": "wav2lip_gan_96",
        "lip_syncer_weight": 0.5,
    }
)

# FaceFusion options the system owns: the worker sets them (paths, the GPU, the downloads) or they
# belong to other FaceFusion commands. Named so a job that sets one is told why.
SYSTEM_OPTIONS: tuple[str, ...] = (
    # paths and patterns
    "config_path",
    "temp_path",
    "jobs_path",
    "source_paths",
    "target_path",
    "output_path",
    "source_pattern",
    "target_pattern",
    "output_pattern",
    # execution and memory
    "execution_device_ids",
    "execution_providers",
    "execution_thread_count",
    "video_memory_strategy",
    # download
    "download_providers",
    "download_scope",
    # benchmark
    "benchmark_mode",
    "benchmark_resolutions",
    "benchmark_cycle_count",
    # uis
    "open_browser",
    "ui_layouts",
    "ui_workflow",
    # misc
    "log_level",
    "halt_on_error",
    # arguments of the job-* commands
    "job_id",
    "job_status",
    "step_index",
)

DEPENDENT_CHOICES: Mapping[str, DependentChoices] = MappingProxyType(
    {
        # FaceFusion re-parses argv for the model and offers only that model's sizes.
        "face_detector_size": DependentChoices(
            "face_detector_model", "yolo_face", MappingProxyType(_FACE_DETECTOR_SIZES)
        ),
        "face_swapper_pixel_boost": DependentChoices(
            "face_swapper_model", "hyperswap_1a_256", MappingProxyType(_FACE_SWAPPER_PIXEL_BOOSTS)
        ),
    }
)

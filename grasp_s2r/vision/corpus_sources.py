"""What enters the background corpus (``grasp-s2r backgrounds``): a curated allowlist of files per package.

Every file here was chosen by looking at it (contact sheets of each package's images): photographs of real
surfaces and scenes (nature, rooms, stone, wood, bark, paper, metal, soil), or textures made from such
photographs. Left out: abstract and rendered art, gradients, logos, icons, text, drawn or painted game textures,
cut-outs on black or white, normal / gloss maps. Each :class:`Source` says what its package holds and why the
rest stays out (docs/vision.md, "More real photos").

KDE / Plasma wallpaper packages are reserved for an independent test and are never used
(:func:`check_not_reserved`, applied to every package however it is asked for).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RESERVED_PATTERN = re.compile(r"kde|plasma", re.IGNORECASE)
"""Package names (Debian, PyPI) the corpus never takes: the KDE / Plasma wallpapers and their kin are reserved
for an independent test of the segmenter (never trained, validated or tuned on)."""


class ReservedPackageError(ValueError):
    """A package reserved for the independent test was asked for."""


def check_not_reserved(name: str, how: str = "") -> None:
    """Raise :class:`ReservedPackageError` when ``name`` is a KDE / Plasma package (``how``: where it came from)."""
    if RESERVED_PATTERN.search(name or ""):
        where = f" ({how})" if how else ""
        raise ReservedPackageError(f"package {name}{where} is reserved for an independent test (KDE / Plasma "
                                   "wallpapers and their kin): the corpus never takes it")


@dataclass(frozen=True)
class Source:
    package: str
    """Debian package name (``kind="deb"``) or PyPI distribution name (``kind="pypi"``)."""
    kind: str
    root: str
    """The folder of ``files`` inside the package (a .deb's data tree; a wheel's / installed distribution's root)."""
    files: tuple[str, ...]
    note: str
    """What the package holds and why the rest stays out."""
    license: str = ""
    """Set only where the package's own license text names the files' license apart from its copyright file."""

    def paths(self) -> tuple[str, ...]:
        return tuple(f"{self.root}/{f}" for f in self.files)


SOURCES: tuple[Source, ...] = (
    Source("mate-backgrounds", "deb", "usr/share/backgrounds/mate/nature", (
        "Aqua.jpg", "Blinds.jpg", "Dune.jpg", "FreshFlower.jpg", "Garden.jpg", "GreenMeadow.jpg", "LadyBird.jpg",
        "RainDrops.jpg", "Storm.jpg", "TwoWings.jpg", "Wood.jpg", "YellowFlower.jpg"),
        "nature/ is photographs (water, leaves, dunes, flowers, a road under a storm, wood); abstract/ and desktop/ "
        "are art, stripes and logos"),
    Source("lomiri-wallpapers-16.04", "deb", "usr/share/backgrounds", (
        "Bridge_by_Sander_Klootwijk.jpg", "Dragonfly_by_Bolly.jpg", "Picture_0B_by_freespace.jpg",
        "Picture_1A_by_freespace.jpg", "Wine_by_Jakkub_Mede.jpg", "aitzgorri_by_Aitzol_Berasategi.jpg",
        "free_by_Peter_Nerlich.jpg", "friends_by_Aitzol_Berasategi.jpg", "greentock_by_Peter_Nerlich.jpg",
        "life_by_Aitzol_Berasategi.jpg", "picosdeeuropa_by_Aitzol_Berasategi.jpg",
        "seeding_by_Clements_Engelhardt.jpg", "sunset_by_Aitzol_Berasategi.jpg"),
        "photographs of rooms, tables, objects and landscapes; analogpattern (film noise) and umang (a gradient) "
        "are not"),
    Source("lomiri-wallpapers-20.04", "deb", "usr/share/backgrounds", ("Kleiber_by_Lukas_Baubkus.jpg",),
           "a tree trunk photograph; Fossa, Infinite-Sea and Painting-Colors are digital art"),
    Source("mypaint-data-extras", "deb", "usr/share/mypaint/backgrounds", (
        "mrmamurk/mamurk_a_1.png", "mrmamurk/mamurk_a_2.png", "mrmamurk/mamurk_b_1.png", "mrmamurk/mamurk_c_3.png",
        "mrmamurk/mamurk_e_1.png", "mrmamurk/mamurk_e_2.png", "mrmamurk/mamurk_f_1.png", "ramon/HR_Canvas 01.png",
        "ramon/HR_Canvas 02.png", "ramon/HR_Cork.png", "ramon/HR_DecoPaper.png", "ramon/HR_PastelPaper 01.png",
        "ramon/HR_PastelPaper 02.png", "ramon/HR_RoughPaper.png", "ramon/HR_SketchPaper 02.png",
        "ramon/HR_SketchPaper.png", "ramon/HR_WaterColor.png"),
        "scans of real paper, canvas and cork: plain light and dark surfaces (all of its images)"),
    Source("gimp-data", "deb", "usr/share/gimp/2.0/patterns", (
        "Animal/leather.pat", "Fabric/burlap.pat", "Food/java.pat", "Paper/crinklepaper.pat", "Paper/paper.pat",
        "Plant/leaves.pat", "Sky/sky.pat", "Stone/Moonfoot.pat", "Stone/brick.pat", "Stone/granite1.pat",
        "Stone/ground1.pat", "Stone/marble1.pat", "Stone/marble2.pat", "Stone/marble3.pat", "Stone/pink_marble.pat",
        "Stone/rock.pat", "Stone/slate.pat", "Stone/stone33.pat", "Water/ice.pat", "Wood/bark.pat",
        "Wood/burlwood.pat", "Wood/corkboard.pat", "Wood/parque1.pat", "Wood/parque2.pat", "Wood/parque3.pat",
        "Wood/walnut.pat", "Wood/wood1.pat", "Wood/wood3.pat", "Wood/wood4.pat", "Wood/wood5.pat"),
        "photographed surface patterns (GIMP .pat); Legacy/ and the drawn or rendered ones (leopard, swirls, "
        "lightning, starfield, craters, terra, pine, wood2, pool, rain) stay out"),
    Source("supertuxkart-data", "deb", "usr/share/games/supertuxkart/data/textures", (
        "HortonRockWall.jpg", "HortonRockWall2.jpg", "HortonStone6.jpg", "Paving_stones_2.jpg", "TiZeta_barkM.png",
        "beige_bricks.jpg", "black_rockMountain.jpg", "blackrock.jpg", "canyon_dirt_road.jpg", "castelwall.jpg",
        "city_bricks.png", "city_concrete.png", "city_ground.jpg", "city_rock.jpg", "concrete2.png",
        "concrete_plain.png", "cracked-earth-texture.jpg", "dark-wall-wood.png", "dirt.jpg", "earth.png",
        "grass_dark.jpg", "hacienda_ground.jpg", "hd_rock_01_d.png", "oldWood.png", "racetrack_grass.jpg",
        "road_dirt.jpg", "rock.jpg", "rockMountain.jpg", "rock_mountain.jpg", "rockwall.jpg", "rockwaterfall.jpg",
        "snowrock.jpg", "stk_darkGrayMetal_a.png", "stk_genericMineRoad_a.png", "stk_generic_bedRock_a.png",
        "stk_generic_brickA.png", "stk_generic_brickRoad_a.png", "stk_generic_dirtA.png",
        "stk_generic_dirtGrassA.png", "stk_generic_grassB.png", "stk_generic_gravalSnow_a.png",
        "stk_generic_oldbricks_a.png", "stk_generic_rockSnow_a.png", "stk_generic_rock_b.png",
        "stk_generic_wallRock_a.png", "stk_greyMetal_a.png", "stk_karstRock_a.png", "stk_lightGrayMetal_a.png",
        "stk_metalRustedBlue_a.png", "stklama_gravelRoad_a.png", "stklama_gravelSide_a.png",
        "stkt_rustedMetal_a.png", "stktex_cliff_a.png", "stktex_earthSnow_a.png", "stktex_generic_WoodA.png",
        "stktex_generic_WoodB.png", "stktex_generic_WoodC.png", "stktex_generic_WoodG.png",
        "stktex_generic_WoodH.png", "stktex_generic_cobbleStoneA.png", "stktex_generic_concreteA.png",
        "stktex_generic_earth_a.png", "stktex_generic_gravelA.png", "stktex_generic_underwaterRock_a.png",
        "stktex_generic_waterConcreteA.png", "stktex_generic_waterRockA.png", "stktex_snowRock_a.png",
        "stktex_treeBark_a.png", "tiles.png", "to_black_rockMountain.jpg", "wall_rock.png", "woodBridge.jpg",
        "wood_planks1.jpg"),
        "photo-based surface textures (stone, brick, concrete, soil, gravel, bark, wood, metal) from the 643 in "
        "data/textures; its drawn and painted textures, sprites on black, strips, normal / gloss / alpha maps, "
        "GUI images and track-specific art stay out"),
    Source("pybullet", "pypi", "pybullet_data", (
        "roboschool/models_outdoor/stadium/stadium_grass.jpg", "table/table.png", "tray/tray.jpg",
        "racecar/meshes/wheel.jpg"),
        "the photographs among pybullet_data's textures (grass, a wooden table top, a metal tray, a wheel); the "
        "rest are checkers, UV maps, height maps, robot texture atlases and a cut-out motor"),
    Source("scikit-learn", "pypi", "sklearn/datasets/images", ("china.jpg", "flower.jpg"),
           "scikit-learn's two sample photographs", license="CC-BY-2.0 (sklearn/datasets/images/README.txt)"),
)
"""The curated sources, in build order."""


def sources_by_name() -> dict[str, Source]:
    return {s.package: s for s in SOURCES}

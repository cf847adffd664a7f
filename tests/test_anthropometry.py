"""Anthropometric tables and the ready-made human models (jaxmb.anthropometry).

References used here, independent of jaxmb's own arithmetic:
- the multibody notes' formulas for the two-link arm (section "Numerical
  simulation"), typed in below;
- published table values (Winter's Table 4.1 for Dempster; de Leva 1996 Table 4),
  typed in below;
- internal identities of the tables (parallel-axis theorem between Winter's columns,
  the same body measured between other endpoints in de Leva, masses adding up);
- Blajer & Czaplicki (2005) eq. (3.1) for the legs of the seven-segment model.
"""

import math
from importlib import resources

import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import anthropometry as A

TABLES = ("dempster", "deleva_male", "deleva_female")
STATURE = {"deleva_male": 1.741, "deleva_female": 1.735}  # de Leva's reference subjects, m

# Only rounding separates the numbers compared with this: relative, far below any
# table digit (1e-4).
EXACT = 1e-12


def _read(name):
    text = (resources.files("jaxmb") / "data" / name).read_text(encoding="utf-8")
    lines = [line.split("\t") for line in text.splitlines() if line.strip()]
    head = [h.strip() for h in lines[0]]
    return [dict(zip(head, (c.strip() for c in line))) for line in lines[1:]]


# ------------------------------------------------------------------ two-link arm


def test_two_link_arm_reproduces_the_notes():
    # the notes, section "Numerical simulation": height, mass = 1.70, 70
    height, mass = 1.70, 70
    L1n, L2n = 0.188 * height, 0.253 * height
    d1n, d2n = 0.436 * L1n, 0.682 * L2n
    m1n, m2n = 0.0280 * mass, 0.0220 * mass
    rg1n, rg2n = 0.322, 0.468
    I1n, I2n = m1n * (rg1n * L1n) ** 2, m2n * (rg2n * L2n) ** 2

    arm = A.two_link_arm()
    assert arm.parent == (-1, 0) and arm.dof == 2
    assert arm.base == "fixed" and arm.coordinates == "relative"
    assert arm.names == ("upper_arm", "forearm_hand")
    np.testing.assert_allclose(arm.length, [L1n, L2n], rtol=EXACT)
    np.testing.assert_allclose(arm.com, [[d1n, 0.0], [d2n, 0.0]], rtol=EXACT)
    np.testing.assert_allclose(arm.mass, [m1n, m2n], rtol=EXACT)
    np.testing.assert_allclose(arm.inertia, [I1n, I2n], rtol=EXACT)
    assert float(arm.attach[1]) == pytest.approx(L1n, rel=EXACT)  # elbow at the humerus' end
    np.testing.assert_array_equal(arm.origin, [0.0, 0.0])  # shoulder

    # other sizes scale the same formulas; keywords reach jaxmb.tree
    arm2 = A.two_link_arm(1.80, 80.0, gravity=9.80665, coordinates="absolute")
    np.testing.assert_allclose(arm2.length, [0.188 * 1.80, 0.253 * 1.80], rtol=EXACT)
    np.testing.assert_allclose(arm2.mass, [0.028 * 80, 0.022 * 80], rtol=EXACT)
    assert float(arm2.gravity) == 9.80665 and arm2.coordinates == "absolute"


# ------------------------------------------------------------- table values


@pytest.mark.parametrize(
    "table, segment, mass, com, gyration",
    [
        # Winter, Table 4.1 (Dempster): mass fraction, CM from proximal, Rg about CM
        ("dempster", "thigh", 0.100, 0.433, 0.323),
        ("dempster", "upper_arm", 0.028, 0.436, 0.322),
        ("dempster", "leg", 0.0465, 0.433, 0.302),
        ("dempster", "forearm_hand", 0.022, 0.682, 0.468),
        ("dempster", "hat", 0.678, 0.626, 0.496),
        # de Leva (1996) Table 4: mass %, CM %, radius % about the transverse axis
        # (rotation in the sagittal plane; the "sagittal" column is the frontal plane's)
        ("deleva_male", "thigh", 0.1416, 0.4095, 0.329),
        ("deleva_female", "thigh", 0.1478, 0.3612, 0.364),
        ("deleva_male", "trunk", 0.4346, 0.4486, 0.347),
        ("deleva_male", "head", 0.0694, 0.5976, 0.376),
        ("deleva_male", "upper_trunk", 0.1596, 0.2999, 0.454),
        ("deleva_female", "upper_arm", 0.0255, 0.5754, 0.260),
    ],
)
def test_published_values(table, segment, mass, com, gyration):
    L, M = 0.4, 70.0
    p = A.segment_parameters(segment, body_mass=M, length=L, table=table)
    assert p.length == L
    assert p.mass == pytest.approx(mass * M, rel=EXACT)
    assert p.com == pytest.approx(com * L, rel=EXACT)
    assert p.inertia == pytest.approx(mass * M * (gyration * L) ** 2, rel=EXACT)
    # names are normalised: case, spaces and hyphens do not matter
    q = A.segment_parameters(segment.upper().replace("_", " "), body_mass=M, length=L, table=table)
    assert q == p


@pytest.mark.parametrize(
    "table, segment, height, length",
    [
        ("dempster", "thigh", 1.0, 0.245),  # Winter Fig. 4.1
        ("dempster", "leg", 1.0, 0.246),
        ("dempster", "upper_arm", 1.0, 0.186),
        ("dempster", "forearm", 1.0, 0.146),
        ("dempster", "hand", 1.0, 0.108),
        ("dempster", "foot", 1.0, 0.152),
        ("dempster", "trunk", 1.0, 0.818 - 0.530),  # hip (GTR) to shoulder heights
        ("deleva_male", "thigh", 1.741, 0.4222),  # de Leva: mean length at his stature
        ("deleva_female", "thigh", 1.735, 0.3685),
        ("deleva_male", "trunk", 1.741, 0.5319),
        ("deleva_male", "shank_2", 1.741, 0.4340),  # KJC-LMAL
        ("deleva_female", "foot", 1.5 * 1.735, 1.5 * 0.2283),  # scales with height
    ],
)
def test_lengths_from_height(table, segment, height, length):
    p = A.segment_parameters(segment, body_mass=1.0, height=height, table=table)
    assert p.length == pytest.approx(length, rel=1e-12)


def test_dempster_columns_obey_the_parallel_axis_theorem():
    # Winter's Rg about the ends follow from the Rg about the CM and the CM
    # position: k_prox^2 = k_cm^2 + c_prox^2. The printed 3-digit values agree to
    # 0.01 (observed worst 0.008, "Total leg"); a transcription error in the first
    # two digits shows up. "Head neck" is left out: its printed 0.116 is 1.116 - 1
    # (see jaxmb/data/SOURCES.txt); jaxmb uses only the Rg-about-CM column.
    for r in _read("dempster_winter.tsv"):
        cp, cd, k, kp, kd = (float(r[c]) for c in ("CM prox", "CM dist", "Rg CM", "Rg prox", "Rg dist"))
        assert cp + cd == pytest.approx(1.0, abs=1e-12), r["Segment"]
        if r["Segment"] == "Head neck" or math.isnan(k):
            continue
        assert math.hypot(k, cp) == pytest.approx(kp, abs=0.01), r["Segment"]
        assert math.hypot(k, cd) == pytest.approx(kd, abs=0.01), r["Segment"]


# bilateral segments count twice in a whole body
WHOLE_BODY = {
    "dempster": {"head_neck": 1, "trunk": 1, "upper_arm": 2, "forearm": 2, "hand": 2, "thigh": 2, "leg": 2, "foot": 2},
    "deleva_male": {"head": 1, "trunk": 1, "upper_arm": 2, "forearm": 2, "hand": 2, "thigh": 2, "shank": 2, "foot": 2},
}
WHOLE_BODY["deleva_female"] = WHOLE_BODY["deleva_male"]


@pytest.mark.parametrize("table", TABLES)
def test_whole_body_mass_fractions_sum_to_one(table):
    frac = {s: A.segment_parameters(s, body_mass=1.0, length=1.0, table=table).mass for s in A.segments(table)}
    total = sum(n * frac[s] for s, n in WHOLE_BODY[table].items())
    # Dempster's fractions have 3-4 decimals and add to 1.000; de Leva's have 4 and
    # add to 1.0000 (male) and 0.9999 (female): at most 14 roundings of 5e-5.
    assert total == pytest.approx(1.0, abs=2e-4)
    if table == "dempster":
        # the composite rows are sums of their parts (Winter's Table 4.1)
        parts = {
            "forearm_hand": ("forearm", "hand"),
            "total_arm": ("upper_arm", "forearm", "hand"),
            "foot_leg": ("leg", "foot"),
            "total_leg": ("thigh", "leg", "foot"),
            "trunk": ("thorax", "abdomen", "pelvis"),
            "thorax_abdomen": ("thorax", "abdomen"),
            "abdomen_pelvis": ("abdomen", "pelvis"),
            "trunk_head_neck": ("trunk", "head_neck"),
            "hat": ("trunk_head_neck", "total_arm", "total_arm"),
        }
        for whole, pieces in parts.items():
            assert frac[whole] == pytest.approx(sum(frac[p] for p in pieces), abs=1e-9), whole
    else:
        # the trunk is its three parts; other endpoints do not change a mass
        assert frac["trunk"] == pytest.approx(frac["upper_trunk"] + frac["middle_trunk"] + frac["lower_trunk"], abs=1e-9)
        for alt, main in [("head_2", "head"), ("trunk_2", "trunk"), ("trunk_3", "trunk"), ("upper_trunk_2", "upper_trunk"),
                          ("forearm_2", "forearm"), ("hand_2", "hand"), ("hand_3", "hand"), ("hand_4", "hand"),
                          ("shank_2", "shank"), ("shank_3", "shank")]:
            assert frac[alt] == frac[main]


# rows of de Leva that describe one body between other endpoints, and the endpoint
# they share (0: first, 1: second)
SAME_BODY = [
    (("head", "head_2"), 0),  # VERT
    (("trunk", "trunk_2", "trunk_3"), 1),  # MIDH
    (("upper_trunk", "upper_trunk_2"), 1),  # XYPH
    (("forearm", "forearm_2"), 0),  # EJC
    (("hand", "hand_2"), 0),  # WJC
    (("hand_3", "hand_4"), 0),  # STYL
    (("shank", "shank_2", "shank_3"), 0),  # KJC
]


@pytest.mark.parametrize("table", ["deleva_male", "deleva_female"])
def test_deleva_lengths_agree_with_the_tables_between_other_endpoints(table):
    """Checks the transcribed mean lengths (deleva_lengths.tsv) against the shared
    tables: one body has one CM and one radius of gyration, whatever the endpoints."""
    H = STATURE[table]
    for names, shared in SAME_BODY:
        ps = [A.segment_parameters(s, body_mass=1.0, height=H, table=table) for s in names]
        d = [p.com if shared == 0 else p.length - p.com for p in ps]  # from the shared point, m
        k = [math.sqrt(p.inertia / p.mass) for p in ps]  # radius of gyration, m
        # CM fractions have 4 decimals and lengths 0.1 mm: <= 0.08 mm per row, so
        # two rows differ by < 0.15 mm (observed <= 0.06 mm); a length off by 1 mm
        # moves d by ~0.5 mm.
        assert np.ptp(d) < 0.15e-3, (names, d)
        # radii have 3 decimals: <= 0.0005 * 0.6 m = 0.3 mm per row
        assert np.ptp(k) < 0.65e-3, (names, k)
    # the three trunk parts end to end make the trunk (SUPR-XYPH-OMPH-MIDH)
    L = {s: A.segment_parameters(s, body_mass=1.0, height=H, table=table).length for s in A.segments(table)}
    assert L["upper_trunk"] + L["middle_trunk"] + L["lower_trunk"] == pytest.approx(L["trunk"], abs=1e-9)


# ------------------------------------------------------------------------- legs


def test_three_segment_leg_dempster():
    H, M = 1.80, 75.0
    leg = A.three_segment_leg(H, M)
    # Winter: thigh 0.245 H, leg 0.246 H, foot 0.152 H; Table 4.1 fractions
    L = np.array([0.245, 0.246, 0.152]) * H
    m = np.array([0.100, 0.0465, 0.0145]) * M
    np.testing.assert_allclose(leg.length, L, rtol=EXACT)
    np.testing.assert_allclose(leg.mass, m, rtol=EXACT)
    np.testing.assert_allclose(leg.com[:, 0], np.array([0.433, 0.433, 0.5]) * L, rtol=EXACT)
    np.testing.assert_allclose(leg.inertia, m * (np.array([0.323, 0.302, 0.475]) * L) ** 2, rtol=EXACT)
    assert leg.parent == (-1, 0, 1) and leg.names == ("thigh", "shank", "foot")
    # the foot hangs from the ankle: its joint is the shank's distal end
    q = np.array([-1.2, 0.3, 1.1])
    np.testing.assert_allclose(jaxmb.joint_positions(leg, q)[2], jaxmb.distal_positions(leg, q)[1], atol=1e-12)


def test_three_segment_leg_deleva():
    H, M = 1.741, 73.0  # de Leva's male reference subject: his mean lengths
    leg = A.three_segment_leg(H, M, "deleva_male", base="floating")
    np.testing.assert_allclose(leg.length, [0.4222, 0.4403, 0.2581], rtol=1e-12)
    np.testing.assert_allclose(leg.mass, np.array([0.1416, 0.0433, 0.0137]) * M, rtol=EXACT)
    np.testing.assert_allclose(leg.com[:, 0], np.array([0.4095, 0.4395, 0.4415]) * leg.length, rtol=EXACT)
    # radii about the transverse axis (sagittal-plane rotation): 32.9, 24.6, 24.5 %
    r = np.array([0.329, 0.246, 0.245]) * np.asarray(leg.length)
    np.testing.assert_allclose(leg.inertia, np.asarray(leg.mass) * r**2, rtol=EXACT)
    assert leg.dof == 5


def test_the_dempster_foot_figures_of_the_docstring():
    """three_segment_leg's docstring: Dempster's foot fractions on the heel-to-toe
    length give 0.0162 kg m^2 at 1.75 m, 70 kg, 4.2x de Leva's male foot (0.0039),
    CM 13.3 cm from the ankle against 11.5 cm."""
    dempster, deleva = A.three_segment_leg(1.75, 70.0), A.three_segment_leg(1.75, 70.0, "deleva_male")
    assert float(dempster.inertia[2]) == pytest.approx(0.0162, abs=5e-5)
    assert float(deleva.inertia[2]) == pytest.approx(0.0039, abs=5e-5)
    assert float(dempster.inertia[2] / deleva.inertia[2]) == pytest.approx(4.2, abs=0.05)
    assert float(dempster.com[2, 0]) == pytest.approx(0.133, abs=5e-4)
    assert float(deleva.com[2, 0]) == pytest.approx(0.115, abs=5e-4)


# ------------------------------------------------------------ seven segments


@pytest.mark.parametrize("table", TABLES)
def test_seven_segment_human_structure_and_mass(table):
    H, M = 1.75, 70.0
    body = A.seven_segment_human(H, M, table)
    assert body.names == ("trunk", "thigh", "shank", "foot", "head", "upper_arm", "forearm_hand")
    assert body.parent == (-1, 0, 1, 2, 0, 0, 5)
    assert body.dof == 9 and body.base == "floating" and body.coordinates == "absolute"
    # total mass: the table's fractions add to 1 within their rounding (see above)
    assert float(body.mass.sum()) == pytest.approx(M, abs=2e-4 * M)
    Lt = float(body.length[0])
    np.testing.assert_allclose(body.attach[1:], [0.0, body.length[1], body.length[2], Lt, Lt, body.length[5]], rtol=EXACT)
    # joints: thigh at the hip (the floating base point), head and arm at the shoulder
    q = np.concatenate([[0.3, 1.0], np.random.default_rng(0).uniform(-3, 3, 7)])
    P = np.asarray(jaxmb.joint_positions(body, q))
    D = np.asarray(jaxmb.distal_positions(body, q))
    np.testing.assert_allclose(P[1], q[:2], atol=1e-12)
    np.testing.assert_allclose(P[4], D[0], atol=1e-12)
    np.testing.assert_allclose(P[5], D[0], atol=1e-12)
    # legs and arms both together: twice one side's table mass
    one = {"dempster": ("thigh", "leg", "foot", "upper_arm", "forearm_hand")}.get(
        table, ("thigh", "shank", "foot", "upper_arm", "forearm", "hand"))
    f = {s: A.segment_parameters(s, body_mass=M, length=1.0, table=table).mass for s in one}
    np.testing.assert_allclose(body.mass[1:4], [2 * f[one[0]], 2 * f[one[1]], 2 * f[one[2]]], rtol=EXACT)
    np.testing.assert_allclose(body.mass[5], 2 * f["upper_arm"], rtol=EXACT)
    fh = f["forearm_hand"] if table == "dempster" else f["forearm"] + f["hand"]
    np.testing.assert_allclose(body.mass[6], 2 * fh, rtol=EXACT)


# Typed in from the published tables (not read from the files the library reads):
# mass fraction, CM from the proximal end and radius of gyration about the CM as
# fractions of the length; thigh, shank, foot, upper arm. Dempster via Winter
# (Biomechanics and Motor Control of Human Movement, Table 4.1; lengths 0.245 H,
# 0.246 H, 0.152 H, 0.186 H, Fig. 4.1); de Leva (J Biomech 29(9), 1996, Table 4,
# males; radius about the transverse, mediolateral, axis: rotation in the sagittal
# plane; thigh 422.2, foot 258.1 and upper arm 281.7 mm of a 1741 mm stature).
_LIMBS = {
    "dempster": ([0.100, 0.0465, 0.0145, 0.028], [0.433, 0.433, 0.50, 0.436], [0.323, 0.302, 0.475, 0.322],
                 {1: 0.245, 2: 0.246, 3: 0.152, 5: 0.186}),
    "deleva_male": ([0.1416, 0.0433, 0.0137, 0.0271], [0.4095, 0.4395, 0.4415, 0.5772], [0.329, 0.246, 0.245, 0.269],
                    {1: 422.2 / 1741, 3: 258.1 / 1741, 5: 281.7 / 1741}),
}


@pytest.mark.parametrize("table", sorted(_LIMBS))
def test_seven_segment_limbs_against_the_published_tables(table):
    # both legs and both arms move together: twice one side's mass and inertia about
    # the CM (the parallel-axis term of two coincident segments is zero), the CM where
    # one side's is
    H, M = 1.75, 70.0
    body = A.seven_segment_human(H, M, table)
    mass, com, gyration = (np.array(v) for v in _LIMBS[table][:3])
    length = _LIMBS[table][3]
    for i, fraction in length.items():
        assert float(body.length[i]) == pytest.approx(fraction * H, rel=1e-12), (table, i)
    idx = [1, 2, 3, 5]
    L = np.asarray(body.length)[idx]
    np.testing.assert_allclose(np.asarray(body.mass)[idx], 2 * M * mass, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(body.com)[idx, 0], com * L, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(body.com)[idx, 1], 0.0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(body.inertia)[idx], 2 * M * mass * (gyration * L) ** 2, rtol=1e-12)


def test_seven_segment_dempster_trunk_and_head_make_the_trunk_head_neck_row():
    H, M = 1.75, 70.0
    body = A.seven_segment_human(H, M, "dempster")
    Lt, Lh = 0.288 * H, 0.118 * H  # hip to shoulder, shoulder to eye level (Winter Fig. 4.1)
    np.testing.assert_allclose(np.asarray(body.length)[[0, 4]], [Lt, Lh], rtol=EXACT)
    # head: Dempster's head-neck, CM at the ear canal (its distal end)
    assert float(body.mass[4]) == pytest.approx(0.081 * M, rel=EXACT)
    assert float(body.com[4, 0]) == pytest.approx(Lh, rel=EXACT)
    assert float(body.inertia[4]) == pytest.approx(0.081 * M * (0.495 * Lh) ** 2, rel=EXACT)
    # trunk + head (standing upright, on one axis from the hip) = Winter's
    # trunk-head-neck row: 0.578 M, CM 0.66 Lt from the hip, Rg 0.503 Lt
    m = np.array([body.mass[0], body.mass[4]])
    y = np.array([body.com[0, 0], Lt + body.com[4, 0]])
    y_c = (m * y).sum() / m.sum()
    I_c = float(body.inertia[0] + body.inertia[4] + (m * (y - y_c) ** 2).sum())
    assert m.sum() == pytest.approx(0.578 * M, rel=1e-12)
    assert float(body.mass[0]) == pytest.approx(0.497 * M, rel=1e-12)  # Winter's trunk row
    assert y_c == pytest.approx(0.66 * Lt, rel=1e-12)
    assert I_c == pytest.approx(0.578 * M * (0.503 * Lt) ** 2, rel=1e-12)
    # forearm and hand: Dempster's row over the forearm length EJC-STYL, both arms
    Lf = 0.146 * H
    assert float(body.length[6]) == pytest.approx(Lf, rel=EXACT)
    assert float(body.com[6, 0]) == pytest.approx(0.682 * Lf, rel=EXACT)
    assert float(body.inertia[6]) == pytest.approx(2 * 0.022 * M * (0.468 * Lf) ** 2, rel=EXACT)


def test_seven_segment_deleva_forearm_hand_and_head():
    H, M = 1.741, 73.0  # de Leva's male reference subject
    body = A.seven_segment_human(H, M, "deleva_male")
    # forearm EJC-WJC 268.9 mm (1.62 %, CM 45.74 %, r_trans 26.5 %) and hand WJC-MET3
    # 86.2 mm (0.61 %, CM 79.00 %, r_trans 51.3 %), one rigid body from the elbow, x2
    Lf, Lh = 0.2689, 0.0862
    mf, mh = 0.0162 * M, 0.0061 * M
    cf, ch = 0.4574 * Lf, Lf + 0.7900 * Lh
    c = (mf * cf + mh * ch) / (mf + mh)
    I = mf * (0.265 * Lf) ** 2 + mh * (0.513 * Lh) ** 2 + mf * (cf - c) ** 2 + mh * (ch - c) ** 2
    assert float(body.length[6]) == pytest.approx(Lf, rel=1e-12)
    assert float(body.mass[6]) == pytest.approx(2 * (mf + mh), rel=1e-12)
    assert float(body.com[6, 0]) == pytest.approx(c, rel=1e-12)
    assert float(body.inertia[6]) == pytest.approx(2 * I, rel=1e-12)
    # trunk: Trunk 3, mid-hip to mid-shoulder 515.5 mm, CM 43.10 % from MIDS
    assert float(body.length[0]) == pytest.approx(0.5155, rel=1e-12)
    assert float(body.com[0, 0]) == pytest.approx((1 - 0.4310) * 0.5155, rel=1e-12)
    # head: vertex 603.3 - 515.5 + 242.9 mm above the mid-shoulder, CM 50.02 % of
    # VERT-CERV below the vertex
    Lhd = 0.6033 - 0.5155 + 0.2429
    assert float(body.length[4]) == pytest.approx(Lhd, rel=1e-12)
    assert float(body.com[4, 0]) == pytest.approx(Lhd - 0.5002 * 0.2429, rel=1e-12)


@pytest.mark.parametrize("table", TABLES)
def test_standing_whole_body_com_height(table):
    H, M = 1.75, 70.0
    body = A.seven_segment_human(H, M, table)
    # upright: trunk and head up, legs and arms down, feet forward (Blajer's angles)
    phi = np.array([0.0, 0.0, 0.0, np.pi / 2, 0.0, 0.0, 0.0])
    theta = A.from_vertical(phi, A.SEVEN_SEGMENT_POINTING)
    np.testing.assert_allclose(theta, [np.pi / 2, -np.pi / 2, -np.pi / 2, 0.0, np.pi / 2, -np.pi / 2, -np.pi / 2])
    y_hip = float(body.length[1] + body.length[2]) + 0.039 * H  # ankle 0.039 H above the floor (Winter Fig. 4.1)
    com = np.asarray(jaxmb.whole_body_com(body, np.concatenate([[0.0, y_hip], theta])))
    # The standing whole-body COM lies at about 0.55-0.57 H; models built from the
    # tables give 0.55-0.58 H (a wrong trunk orientation or a CM measured from the
    # wrong end moves it by > 0.03 H).
    assert 0.53 * H < com[1] < 0.60 * H
    assert abs(com[0]) < 0.02 * H  # feet forward shift it by millimetres


def test_from_vertical_matches_blajer_leg_equations():
    rng = np.random.default_rng(1)
    body = A.seven_segment_human(1.80, 82.0, "deleva_male")
    l = np.asarray(body.length)
    c = np.asarray(body.com[:, 0])
    for _ in range(3):
        xH, yH = rng.uniform(-1, 1, 2)
        phi = rng.uniform(-np.pi, np.pi, 7)
        q = np.concatenate([[xH, yH], A.from_vertical(phi, A.SEVEN_SEGMENT_POINTING)])
        C = np.asarray(jaxmb.com_positions(body, q))
        s, k = np.sin(phi), np.cos(phi)
        # Blajer & Czaplicki (2005) eq. (3.1) at z = 0: segments 2, 3, 4 (ours 1, 2, 3)
        np.testing.assert_allclose(C[1], [xH + c[1] * s[1], yH - c[1] * k[1]], atol=1e-12)
        np.testing.assert_allclose(C[2], [xH + l[1] * s[1] + c[2] * s[2], yH - l[1] * k[1] - c[2] * k[2]], atol=1e-12)
        np.testing.assert_allclose(
            C[3],
            [xH + l[1] * s[1] + l[2] * s[2] + c[3] * s[3], yH - l[1] * k[1] - l[2] * k[2] - c[3] * k[3]],
            atol=1e-12,
        )
        # the trunk points up from the hip: x = xH - c sin(phi), y = yH + c cos(phi)
        np.testing.assert_allclose(C[0], [xH - c[0] * s[0], yH + c[0] * k[0]], atol=1e-12)
        np.testing.assert_allclose(A.to_vertical(q[2:], A.SEVEN_SEGMENT_POINTING), phi, atol=1e-15)
    # scalars, and JAX arrays stay JAX arrays
    assert A.from_vertical(0.0) == pytest.approx(-np.pi / 2)
    assert A.from_vertical(0.0, "up") == pytest.approx(np.pi / 2)
    assert A.to_vertical(0.0, "up") == pytest.approx(-np.pi / 2)
    out = A.from_vertical(jnp.zeros(7), A.SEVEN_SEGMENT_POINTING)
    assert isinstance(out, jnp.ndarray) and out.shape == (7,)


def test_model_keywords_are_forwarded():
    body = A.seven_segment_human(1.7, 65.0, gravity=9.80665, base="fixed", coordinates="relative", origin=(0.1, 0.9))
    assert body.dof == 7 and body.coordinates == "relative" and float(body.gravity) == 9.80665
    np.testing.assert_allclose(body.origin, [0.1, 0.9])
    names = ("a", "b", "c")
    assert A.three_segment_leg(1.7, 65.0, names=names).names == names


# ------------------------------------------------------------------ bad input


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown anthropometric table"):
        A.segment_parameters("thigh", body_mass=70, height=1.7, table="winter")
    with pytest.raises(ValueError, match="unknown anthropometric table"):
        A.segments("nope")
    with pytest.raises(ValueError, match="unknown anthropometric table"):
        A.seven_segment_human(table="deleva")
    with pytest.raises(ValueError, match="unknown anthropometric table"):
        A.three_segment_leg(1.7, 70, table=None)
    with pytest.raises(ValueError, match="unknown segment 'femur'") as err:
        A.segment_parameters("femur", body_mass=70, height=1.7)
    assert "'thigh'" in str(err.value) and "'upper_arm'" in str(err.value)  # lists the known ones
    with pytest.raises(ValueError, match="'shank'"):
        A.segment_parameters("leg", body_mass=70, height=1.7, table="deleva_female")
    for bad in (0.0, -1.75, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="height"):
            A.segment_parameters("thigh", body_mass=70, height=bad)
        with pytest.raises(ValueError, match="body_mass"):
            A.segment_parameters("thigh", body_mass=bad, height=1.7)
        with pytest.raises(ValueError, match="length"):
            A.segment_parameters("thigh", body_mass=70, length=bad)
        with pytest.raises(ValueError, match="height"):
            A.seven_segment_human(height=bad)
        with pytest.raises(ValueError, match="body_mass"):
            A.two_link_arm(body_mass=bad)
        with pytest.raises(ValueError, match="body_mass"):
            A.three_segment_leg(1.7, bad)
    with pytest.raises(ValueError, match="scalar"):
        A.segment_parameters("thigh", body_mass=[70, 80], height=1.7)
    # a numeric string or a bool is no number (NumPy would parse "70" and read True as 1)
    for bad in ("heavy", "70", True, np.bool_(True), 1 + 2j):
        with pytest.raises(ValueError, match="body_mass must be a real number"):
            A.segment_parameters("thigh", body_mass=bad, height=1.7)
        with pytest.raises(ValueError, match="height must be a real number"):
            A.seven_segment_human(height=bad)
    with pytest.raises(ValueError, match="not both"):
        A.segment_parameters("thigh", body_mass=70, height=1.7, length=0.4)
    with pytest.raises(ValueError, match="height= .* length="):
        A.segment_parameters("thigh", body_mass=70)
    # Dempster's thorax has no landmark in Winter's Fig. 4.1 and no radius of gyration
    with pytest.raises(ValueError, match="length="):
        A.segment_parameters("thorax", body_mass=70, height=1.7)
    p = A.segment_parameters("thorax", body_mass=70, length=0.3)
    assert p.mass == pytest.approx(0.216 * 70) and p.com == pytest.approx(0.82 * 0.3) and math.isnan(p.inertia)
    with pytest.raises(ValueError, match="pointing"):
        A.from_vertical(0.0, "sideways")


def test_tables_and_sources_are_bundled():
    assert A.tables() == TABLES
    assert len(A.segments("dempster")) == 19 and len(A.segments("deleva_male")) == 21
    sources = (resources.files("jaxmb") / "data" / "SOURCES.txt").read_text(encoding="utf-8")
    for ref in ("Dempster", "Winter", "de Leva", "Drillis", "1741"):
        assert ref in sources


def test_vertical_angle_maps_keep_the_float_dtype():
    """float32 angles stay float32 under x64 (the offsets were float64 NumPy arrays and
    promoted them); integers and lists become float64, as before."""
    P = A.SEVEN_SEGMENT_POINTING
    for phi in (jnp.zeros(7, jnp.float32), np.zeros(7, np.float32)):
        theta = A.from_vertical(phi + 0.25, P)
        assert theta.dtype == np.float32 and type(theta) is type(phi)
        assert A.to_vertical(theta, P).dtype == np.float32
        np.testing.assert_allclose(A.to_vertical(theta, P), 0.25, atol=1e-6)
    assert A.from_vertical(np.zeros(7, int), P).dtype == np.float64
    assert A.from_vertical([0.0] * 7, P).dtype == np.float64


@pytest.mark.parametrize("call, match", [
    (lambda: jaxmb.three_segment_leg(175, 70), r"height 175 m is outside a person's 0.3 to 3 m: give it in metres"),
    (lambda: jaxmb.seven_segment_human(body_mass=70000.0), r"body_mass 70000 kg is outside a person's 1 to 500 kg"),
    (lambda: jaxmb.segment_parameters("thigh", body_mass=70.0, length=42.0), r"length 42 m is outside"),
])  # fmt: skip
def test_a_body_size_in_other_units_is_refused(call, match):
    # a height in centimetres gave a 42.9 m thigh with an inertia of 1342 kg m^2
    with pytest.raises(ValueError, match=match):
        call()

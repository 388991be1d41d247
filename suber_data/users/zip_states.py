"""US state of a zip code, from its first three digits (the USPS prefix ranges). Codes that are not five US
digits (Canadian postal codes in ml-100k, blanks) have no state."""

from __future__ import annotations

# (first prefix, last prefix, state): the ranges of the USPS three-digit zip prefixes.
_RANGES = (
    (5, 5, "NY"), (6, 9, "PR"), (10, 27, "MA"), (28, 29, "RI"), (30, 38, "NH"), (39, 49, "ME"), (50, 54, "VT"),
    (55, 55, "MA"), (56, 59, "VT"), (60, 69, "CT"), (70, 89, "NJ"), (100, 149, "NY"), (150, 196, "PA"),
    (197, 199, "DE"), (200, 200, "DC"), (201, 201, "VA"), (202, 205, "DC"), (206, 219, "MD"), (220, 246, "VA"),
    (247, 268, "WV"), (270, 289, "NC"), (290, 299, "SC"), (300, 319, "GA"), (320, 339, "FL"), (341, 349, "FL"),
    (350, 369, "AL"), (370, 385, "TN"), (386, 397, "MS"), (398, 399, "GA"), (400, 427, "KY"), (430, 459, "OH"),
    (460, 479, "IN"), (480, 499, "MI"), (500, 528, "IA"), (530, 549, "WI"), (550, 567, "MN"), (569, 569, "DC"),
    (570, 577, "SD"), (580, 588, "ND"), (590, 599, "MT"), (600, 629, "IL"), (630, 658, "MO"), (660, 679, "KS"),
    (680, 693, "NE"), (700, 714, "LA"), (716, 729, "AR"), (730, 749, "OK"), (750, 799, "TX"), (800, 816, "CO"),
    (820, 831, "WY"), (832, 838, "ID"), (840, 847, "UT"), (850, 865, "AZ"), (870, 884, "NM"), (885, 885, "TX"),
    (889, 898, "NV"), (900, 961, "CA"), (967, 968, "HI"), (969, 969, "GU"), (970, 979, "OR"), (980, 994, "WA"),
    (995, 999, "AK"),
)  # fmt: skip
_BY_PREFIX = {p: state for lo, hi, state in _RANGES for p in range(lo, hi + 1)}


def zip_state(code: str | None) -> str | None:
    """ "55105" -> "MN"; None for anything but a US zip (five digits, ZIP+4 allowed)."""
    if not code:
        return None
    head = code.strip().split("-")[0]
    if len(head) != 5 or not head.isdigit():
        return None
    return _BY_PREFIX.get(int(head[:3]))

"""Plural suite: practitioner-calibrated reference policies and jury scoring (VEILED-SH).

Calibration side: profiles fit on practitioners' labels, selection, freeze, scale-out,
release and agreement. Evaluation side: diagnostic sample, responses, jury, scoring.
"""

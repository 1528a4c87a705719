"""Figures: functions take results or DataFrames and return matplotlib Figures."""

"""Persona coherence rules: demographic and tag combinations a real user profile would not show.

Users are drawn to keep them (``users.make_user``); ``realism.persona_incoherent_share`` counts breaches."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def tag_clashes(gender: str, tags: Iterable[str]) -> list[str]:
    """User tags that contradict the gender (a 男 user tagged 宝妈 / 孕期准备, a 女 user tagged 宝爸)."""
    marks = ("妈", "孕") if gender == "男" else ("爸",) if gender == "女" else ()
    return [tag for tag in tags if any(mark in tag for mark in marks)]


def rule_violations(demographics: dict[str, Any], tags: Iterable[str] = ()) -> list[str]:
    """Demographic combinations (and user tags) a real user profile would not show."""
    age = str(demographics.get("年龄段", ""))
    job = str(demographics.get("职业", ""))
    gender = str(demographics.get("性别", ""))
    problems: list[str] = []
    if job == "全职妈妈" and gender != "女":
        problems.append("male full-time mother")
    if job == "退休人员" and age in ("18-24", "25-34"):
        problems.append("retired under 35")
    if job == "学生" and age in ("45-54", "55+"):
        problems.append("student aged 45+")
    problems.extend(f"tag {tag} for {gender}" for tag in tag_clashes(gender, tags))
    for tag in tags:  # tags against age and occupation too
        if tag in _STUDENT_TAGS and age in ("45-54", "55+"):
            problems.append(f"tag {tag} aged {age}")
        if tag == "教师" and job != "教师":
            problems.append(f"tag 教师 for a {job}")
        if any(mark in tag for mark in ("妈", "爸", "孕", "育儿")) and age == "55+":
            problems.append(f"tag {tag} aged 55+")
        if tag == "中老年" and age in ("18-24", "25-34", "35-44"):
            problems.append(f"tag 中老年 aged {age}")
        if tag in _WORK_TAGS and job in ("学生", "退休人员"):
            problems.append(f"tag {tag} for a {job}")
        if tag in BUSINESS_TAGS and job in ("学生", "退休人员", "全职妈妈"):
            problems.append(f"business tag {tag} for a {job}")
        if tag in _STUDENT_TAGS and job != "学生":
            problems.append(f"tag {tag} for a {job}")
    return problems


_STUDENT_TAGS = ("学生党", "考研党")
_WORK_TAGS = ("上班族", "办公室白领", "职场通勤", "长途通勤")
BUSINESS_TAGS = ("夜市经营者", "小餐饮创业", "早餐店主", "餐饮连锁采购", "小微企业主", "工厂采购", "网约车司机", "装修师傅", "电工")
"""Tags of a trade or a business, which a student, a retiree or a full-time mother does not carry."""

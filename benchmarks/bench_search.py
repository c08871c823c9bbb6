"""Search benchmark: index build time, uncached/cached latency, and full search call vs raw FTS5 query.

Usage: python benchmarks/bench_search.py [--products ARCHIVE.json(.gz)] [--n 22700]
Without --products a synthetic Chinese catalog of --n products is generated with random.Random(0).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from shopsimrl.catalog.archive import parse_archive_json, read_archive_bytes
from shopsimrl.search import SearchIndex, build_search_index, search_tokens

NOUNS = ["小吃车", "冰箱", "耳机", "连衣裙", "睫毛膏", "枕头", "电饭煲", "运动鞋", "数据线", "收纳箱", "保温杯", "猫粮"]
ADJ = ["可移动", "静音", "节能", "防水", "卷翘", "护颈", "大容量", "轻便", "加厚", "不锈钢", "多功能", "迷你"]
SHOPS = ["鑫厨", "海尔", "小熊", "美的", "华为", "小米", "花间", "眠趣", "旺铺", "棉语"]
AXES = {"颜色分类": ["黑色", "白色", "银色", "蓝色"], "尺码": ["S", "M", "L", "XL"], "规格": ["标准版", "豪华款", "加大款"]}


def _han(rng: random.Random, length: int) -> str:
    return "".join(chr(rng.randint(0x4E00, 0x62FF)) for _ in range(length))


def synthetic(n: int, leaves: int = 160) -> list[dict]:
    """~n products in ``leaves`` leaf categories; each leaf has its own noun and attribute pool (realistic selectivity)."""
    rng = random.Random(0)
    leaf_nouns = NOUNS + [_han(rng, 3) for _ in range(leaves - len(NOUNS))]
    leaf_attrs = [ADJ[:4] + [_han(rng, 2) for _ in range(8)] for _ in range(leaves)]
    products = []
    for i in range(n):
        leaf = i % leaves
        noun = leaf_nouns[leaf]
        adjs = rng.sample(leaf_attrs[leaf], 3)
        axis = rng.choice(list(AXES))
        products.append({
            "asin": f"{100000000000 + i}",
            "title": f"{rng.choice(SHOPS)}{''.join(adjs)}{noun} {rng.choice(['A', 'X', 'K'])}{rng.randint(10, 999)}",
            "shop_name": rng.choice(SHOPS) + "旗舰店",
            "category": f"百货›{noun}类›{noun}",
            "attribute": adjs,
            "customization_options": {axis: [{"value": v} for v in rng.sample(AXES[axis], 2)]},
            "small_description": [f"{adjs[0]}{noun}"],
        })
    return products


def queries(products: list[dict], count: int = 200) -> list[str]:
    rng = random.Random(1)
    picks = [rng.choice(products) for _ in range(count)]
    return [f"{p['attribute'][0]} {p['attribute'][1]} {p['category'].split('›')[-1]}" for p in picks]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--products")
    parser.add_argument("--n", type=int, default=22_700)
    args = parser.parse_args()
    products = parse_archive_json(read_archive_bytes(args.products)) if args.products else synthetic(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite3"
        start = time.perf_counter()
        build_search_index(products, path, product_data_sha256="bench")
        build_s = time.perf_counter() - start
        index = SearchIndex.open(path)
        query_set = queries(products)
        for q in query_set[:20]:
            index.search_uncached(q)  # warm the page cache
        full, raw = [], []
        for q in query_set:  # side by side, interleaved, same tokens
            tokens = search_tokens(q)
            t0 = time.perf_counter()
            index.search_uncached(q)
            t1 = time.perf_counter()
            index.raw_fts_query(tokens, 150)
            t2 = time.perf_counter()
            full.append((t1 - t0) * 1e3)
            raw.append((t2 - t1) * 1e3)
        cached = []
        for q in query_set:
            index.search(q)
        for q in query_set:
            t0 = time.perf_counter()
            index.search(q)
            cached.append((time.perf_counter() - t0) * 1e3)
        print(f"products                 {len(products)}")
        print(f"index build              {build_s:.2f} s   (target <= 20 s)")
        print(f"uncached search p50/p99  {percentile(full, .5):.3f} / {percentile(full, .99):.3f} ms   (targets <= 2 / <= 10 ms)")
        print(f"raw FTS5 query  p50/p99  {percentile(raw, .5):.3f} / {percentile(raw, .99):.3f} ms")
        print(f"cached search   p50      {percentile(cached, .5):.4f} ms")
        ratio = statistics.mean(full) / statistics.mean(raw)
        print(f"full call / raw FTS5     {ratio:.3f}   (target <= 1.3; mean over {len(query_set)} queries)")
        index.close()


if __name__ == "__main__":
    main()

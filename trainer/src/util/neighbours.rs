//! Nearest neighbours among points of a few dimensions: a k-d tree with a search radius
//! and a bound on the work of each query.

use std::collections::BinaryHeap;

/// Points of `dim` values in a k-d tree (the median of the widest coordinate splits
/// each subtree), for the `k` nearest within a radius.
///
/// ```
/// use laq::util::neighbours::KdTree;
/// // Five points on a line.
/// let tree = KdTree::new(&[0.0, 1.0, 2.0, 3.0, 10.0], 1);
/// // The two nearest to 2.2 within 1.5: 2 then 3 (squared distances).
/// let near = tree.nearest(&[2.2], 2, 1.5 * 1.5, usize::MAX);
/// assert_eq!(near.iter().map(|&(_, i)| i).collect::<Vec<_>>(), [2, 3]);
/// // Nothing within 1 of 6.
/// assert!(tree.nearest(&[6.0], 3, 1.0, usize::MAX).is_empty());
/// ```
pub struct KdTree<'a> {
    points: &'a [f32],
    dim: usize,
    /// Point indices in tree order: the node of `order[lo..hi]` is `order[(lo + hi) / 2]`,
    /// its subtrees the halves on either side.
    order: Vec<u32>,
    /// The coordinate that splits the node at each position of `order`.
    split: Vec<u8>,
}

impl<'a> KdTree<'a> {
    /// The tree of the row-major points `[n, dim]` (at most `u32::MAX` points of at most
    /// 255 dimensions).
    pub fn new(points: &'a [f32], dim: usize) -> Self {
        let n = points.len() / dim.max(1);
        let mut tree = KdTree {
            points,
            dim,
            order: (0..n as u32).collect(),
            split: vec![0; n],
        };
        if dim > 0 {
            tree.build(0, n);
        }
        tree
    }

    fn point(&self, i: u32) -> &[f32] {
        &self.points[i as usize * self.dim..(i as usize + 1) * self.dim]
    }

    fn build(&mut self, lo: usize, hi: usize) {
        if hi - lo <= 1 {
            return;
        }
        let mut widest = (0, f32::NEG_INFINITY);
        for c in 0..self.dim {
            let (mut min, mut max) = (f32::INFINITY, f32::NEG_INFINITY);
            for &i in &self.order[lo..hi] {
                let v = self.points[i as usize * self.dim + c];
                min = min.min(v);
                max = max.max(v);
            }
            if max - min > widest.1 {
                widest = (c, max - min);
            }
        }
        let (c, mid) = (widest.0, (lo + hi) / 2);
        let (points, dim) = (self.points, self.dim);
        self.order[lo..hi].select_nth_unstable_by(mid - lo, |&a, &b| {
            points[a as usize * dim + c].total_cmp(&points[b as usize * dim + c])
        });
        self.split[mid] = c as u8;
        self.build(lo, mid);
        self.build(mid + 1, hi);
    }

    /// Up to `k` points nearest `query` with squared Euclidean distance at most `radius2`,
    /// as `(squared distance, index)`, nearest first (the query itself included if it is
    /// a point). The search stops after `budget` distance evaluations: past it, the
    /// neighbours found so far (the exact ones whenever the radius keeps the search
    /// small).
    pub fn nearest(
        &self,
        query: &[f32],
        k: usize,
        radius2: f32,
        budget: usize,
    ) -> Vec<(f32, usize)> {
        // The farthest candidate on top: squared distances are non-negative, and the bits
        // of non-negative floats order like the floats.
        let mut heap = BinaryHeap::with_capacity(k + 1);
        let mut work = budget;
        if k > 0 && self.dim > 0 {
            self.search(query, k, radius2, 0, self.order.len(), &mut heap, &mut work);
        }
        heap.into_sorted_vec()
            .into_iter()
            .map(|(bits, i)| (f32::from_bits(bits), i as usize))
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        query: &[f32],
        k: usize,
        radius2: f32,
        lo: usize,
        hi: usize,
        heap: &mut BinaryHeap<(u32, u32)>,
        work: &mut usize,
    ) {
        if lo >= hi || *work == 0 {
            return;
        }
        *work -= 1;
        let mid = (lo + hi) / 2;
        let node = self.order[mid];
        let d2: f32 = self
            .point(node)
            .iter()
            .zip(query)
            .map(|(a, b)| (a - b) * (a - b))
            .sum();
        let bound = |heap: &BinaryHeap<(u32, u32)>| match heap.peek() {
            Some(&(far, _)) if heap.len() == k => f32::from_bits(far).min(radius2),
            _ => radius2,
        };
        if d2 <= bound(heap) {
            heap.push((d2.to_bits(), node));
            if heap.len() > k {
                heap.pop();
            }
        }
        let c = self.split[mid] as usize;
        let gap = query[c] - self.point(node)[c];
        let (first, second) = if gap < 0.0 {
            ((lo, mid), (mid + 1, hi))
        } else {
            ((mid + 1, hi), (lo, mid))
        };
        self.search(query, k, radius2, first.0, first.1, heap, work);
        if gap * gap <= bound(heap) {
            self.search(query, k, radius2, second.0, second.1, heap, work);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brute(points: &[f32], dim: usize, q: &[f32], k: usize, r2: f32) -> Vec<(f32, usize)> {
        let mut all: Vec<(f32, usize)> = points
            .chunks(dim)
            .enumerate()
            .map(|(i, p)| (p.iter().zip(q).map(|(a, b)| (a - b) * (a - b)).sum(), i))
            .filter(|&(d, _)| d <= r2)
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        all.truncate(k);
        all
    }

    proptest! {
        #[test]
        fn the_tree_finds_what_a_scan_finds(
            dim in 1usize..5,
            raw in prop::collection::vec(-4i8..4, 0..400),
            q in prop::collection::vec(-5i8..5, 4),
            k in 0usize..12,
            r in 0u8..6,
        ) {
            // Small integers: many ties and duplicates, exact squared distances.
            let points: Vec<f32> = raw.iter().map(|&v| v as f32).collect();
            let points = &points[..points.len() / dim * dim];
            let q: Vec<f32> = q[..dim].iter().map(|&v| v as f32).collect();
            let r2 = (r * r) as f32;
            let tree = KdTree::new(points, dim);
            let got = tree.nearest(&q, k, r2, usize::MAX);
            let want = brute(points, dim, &q, k, r2);
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_budget_bounds_the_work() {
        let points: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        let tree = KdTree::new(&points, 1);
        let all = tree.nearest(&[500.0], 5, f32::INFINITY, usize::MAX);
        assert_eq!(all.len(), 5);
        // One evaluation: the root alone.
        let one = tree.nearest(&[500.0], 5, f32::INFINITY, 1);
        assert_eq!(one.len(), 1);
    }
}

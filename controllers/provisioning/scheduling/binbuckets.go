package scheduling

import (
	"cmp"
	"math"
	"slices"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// The containers of the bin index (binindex.go): buckets of bins kept by a logarithmic key, and
// the room grid of a partition.

// buckets holds bins in buckets, keeping only those that have had bins, in bucket order.
type buckets struct {
	cells []bucket
}

// lowerBound returns the least i < n whose key(i) is at least k, or n when there is none; the
// keys must not decrease with i.
func lowerBound(n, k int, key func(i int) int16) int {
	lo, hi := 0, n
	for lo < hi {
		mid := (lo + hi) / 2
		if int(key(mid)) < k {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// bucket is the bins of one bucket: in a room grid's cell in order of least slack, then lowest
// bin id (addInOrder); in price buckets in no particular order.
type bucket struct {
	key  int16
	bins []indexedBin
}

// indexedBin is a bin in a bucket with its room at its current size, so that a search can rule it
// out without reading the bin.
type indexedBin struct {
	b    *bin
	room [resources.NumCore]int64
	// slack is the room weighted as slackOf weighs it.
	slack float64
}

// from returns the position of the first bucket kept whose key is at least k.
func (bs *buckets) from(k int) int {
	return lowerBound(len(bs.cells), k, func(i int) int16 { return bs.cells[i].key })
}

// add puts b in bucket k, at the end, and returns its position there.
func (bs *buckets) add(b indexedBin, k int) int32 {
	i := bs.from(k)
	if i == len(bs.cells) || int(bs.cells[i].key) != k {
		bs.cells = slices.Insert(bs.cells, i, bucket{key: int16(k)})
	}
	bs.cells[i].bins = append(bs.cells[i].bins, b)
	return int32(len(bs.cells[i].bins) - 1)
}

// remove takes the bin at position pos out of bucket k, moving the last bin of the bucket into
// its place, and returns the moved bin (nil when none moved).
func (bs *buckets) remove(k int, pos int32) *bin {
	i := bs.from(k)
	list := bs.cells[i].bins
	last := list[len(list)-1]
	list[pos] = last
	list[len(list)-1] = indexedBin{}
	bs.cells[i].bins = list[:len(list)-1] // an emptied bucket stays, ready for the next bin
	if int(pos) == len(list)-1 {
		return nil
	}
	return last.b
}

// octaveSteps are the bucket boundaries within a factor of two: 2^(i/indexPerOctave).
func octaveSteps() [indexPerOctave]float64 {
	return [indexPerOctave]float64{1, 1.0905077326652577, 1.189207115002721, 1.2968395546510096,
		1.4142135623730951, 1.5422108254079407, 1.681792830507429, 1.8340080864093424}
}

// bucketOf maps an amount to its bucket: 0 for nothing (or less), then indexPerOctave buckets per
// factor of two (bucket indexBuckets/2 starts at 1); it never decreases as v grows. It takes no
// logarithm, since every change to a bin calls it.
func bucketOf(v float64) int {
	if v <= 0 {
		return 0
	}
	m, e := math.Frexp(v) // v = m·2^e, m in [0.5, 1)
	m, e = 2*m, e-1
	steps := octaveSteps()
	sub := 0
	for sub+1 < indexPerOctave && m >= steps[sub+1] {
		sub++
	}
	k := e*indexPerOctave + sub + indexBuckets/2
	return min(max(k, 1), indexBuckets-1)
}

// bucketFloor is the least amount bucket k holds (-Inf for bucket 0, which holds what is not
// positive).
func bucketFloor(k int) float64 {
	if k <= 0 {
		return math.Inf(-1)
	}
	return bucketFloors[min(k, indexBuckets-1)]
}

// bucketFloors holds bucketFloor of every bucket, read in the inner loops of roomCandidates.
var bucketFloors = func() (out [indexBuckets]float64) {
	steps := octaveSteps()
	for k := 1; k < indexBuckets; k++ {
		if k == 1 {
			continue // 0: it also holds everything smaller
		}
		d := k - indexBuckets/2
		q, r := d/indexPerOctave, d%indexPerOctave
		if r < 0 {
			q, r = q-1, r+indexPerOctave
		}
		out[k] = math.Ldexp(steps[r], q)
	}
	return out
}()

// roomGrid holds bins by cpu room (rows) and memory room (the buckets of a row), keeping only the
// rows that have had bins, in row order.
type roomGrid struct {
	rows []gridRow
}

type gridRow struct {
	key  int16
	cols buckets
}

// from returns the position of the first row kept whose key is at least k.
func (g *roomGrid) from(k int) int {
	return lowerBound(len(g.rows), k, func(i int) int16 { return g.rows[i].key })
}

// add puts b in cell (row, col), in order, and reports through at the new position of every bin
// that moved (b included).
func (g *roomGrid) add(b indexedBin, row, col int, at func(*bin, int32)) {
	i := g.from(row)
	if i == len(g.rows) || int(g.rows[i].key) != row {
		g.rows = slices.Insert(g.rows, i, gridRow{key: int16(row)})
	}
	g.rows[i].cols.addInOrder(b, col, at)
}

// remove takes the bin at position pos out of cell (row, col), keeping the order, and reports
// through at the new position of every bin that moved.
func (g *roomGrid) remove(row, col int, pos int32, at func(*bin, int32)) {
	g.rows[g.from(row)].cols.removeInOrder(col, pos, at)
}

// addInOrder puts b in bucket k keeping the bucket in order of least slack, then lowest bin id
// (the order roomCandidates tries bins in), and reports through at the new position of every bin
// that moved (b included).
func (bs *buckets) addInOrder(b indexedBin, k int, at func(*bin, int32)) {
	i := bs.from(k)
	if i == len(bs.cells) || int(bs.cells[i].key) != k {
		bs.cells = slices.Insert(bs.cells, i, bucket{key: int16(k)})
	}
	list := bs.cells[i].bins
	pos, _ := slices.BinarySearchFunc(list, b, func(e, t indexedBin) int {
		return cmp.Or(cmp.Compare(e.slack, t.slack), cmp.Compare(e.b.id, t.b.id))
	})
	list = slices.Insert(list, pos, b)
	bs.cells[i].bins = list
	for j := pos; j < len(list); j++ {
		at(list[j].b, int32(j))
	}
}

// removeInOrder takes the bin at position pos out of bucket k, keeping the order, and reports
// through at the new position of every bin that moved.
func (bs *buckets) removeInOrder(k int, pos int32, at func(*bin, int32)) {
	i := bs.from(k)
	list := slices.Delete(bs.cells[i].bins, int(pos), int(pos)+1) // an emptied bucket stays
	bs.cells[i].bins = list
	for j := int(pos); j < len(list); j++ {
		at(list[j].b, int32(j))
	}
}

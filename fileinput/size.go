package fileinput

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DefaultMaxFileSize is the size limit of one input file, or of standard input, when
// Options.MaxFileSize is zero.
const DefaultMaxFileSize int64 = 64 << 20

// FormatSize prints a byte count the way ParseSize reads it: 64MiB, 512KiB, 1GiB, or 1234B for a count that
// is not a whole number of KiB. Counts of at least a MiB that are not whole are rounded, as 66.8MiB.
func FormatSize(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	if n >= 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "MiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// ParseSize reads a positive byte count: a whole number optionally followed by a binary unit, K, M or G
// (each may be written K, KB, Ki or KiB, in any case; 1K = 1KiB = 1024 bytes), or B for bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a whole number of bytes with an optional unit, such as 64Mi, 512Ki or 1048576", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	var mult int64
	switch unit := strings.TrimSpace(t[i:]); strings.ToUpper(unit) {
	case "", "B":
		mult = 1
	case "K", "KB", "KI", "KIB":
		mult = 1 << 10
	case "M", "MB", "MI", "MIB":
		mult = 1 << 20
	case "G", "GB", "GI", "GIB":
		mult = 1 << 30
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q; use B, Ki, Mi or Gi", s, unit)
	}
	if n <= 0 {
		return 0, fmt.Errorf("size %q: must be larger than zero", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n * mult, nil
}

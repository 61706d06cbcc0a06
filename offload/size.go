package offload

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size units accepted by ParseSize. Binary units (KiB, MiB, GiB, TiB) are
// powers of 1024, decimal ones (KB, MB, GB, TB) powers of 1000, as in
// accelerate's max_memory strings and IEC 80000-13.
var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
	"kb":  1000,
	"mb":  1000 * 1000,
	"gb":  1000 * 1000 * 1000,
	"tb":  1000 * 1000 * 1000 * 1000,
}

// ParseSize parses a memory size: a non-negative number (integer or decimal)
// followed, optionally after one space, by a unit: B, KiB, MiB, GiB, TiB
// (binary, 1024ⁿ) or KB, MB, GB, TB (decimal, 1000ⁿ). Units are matched
// case-insensitively ("8gib" = "8GiB"; "8Gb" means gigabytes, never
// gigabits). A bare number is a count of bytes. The result is rounded to the
// nearest byte.
//
// The one-letter forms "8G", "8M", "8K", "8T" are refused on purpose: tools
// disagree on them (GNU coreutils and Docker read 1024ⁿ, Kubernetes and
// accelerate's max_memory 1000ⁿ), and the 7% between 8 GiB and 8 GB can be
// the difference between a plan that fits and an out-of-memory error. The
// error says which two spellings to choose from.
func ParseSize(s string) (int64, error) {
	in := s
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty size (want e.g. 8GiB or 8GB)")
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.TrimSpace(s[i:])
	if num == "" {
		return 0, fmt.Errorf("size %q: want a number then a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", in)
	}
	if s[i:] != unit && !strings.HasPrefix(s[i:], " ") {
		return 0, fmt.Errorf("size %q: unexpected characters", in)
	}
	if strings.Contains(s[i:], "  ") {
		return 0, fmt.Errorf("size %q: unexpected spacing", in)
	}
	mult, ok := sizeUnits[strings.ToLower(unit)]
	if !ok {
		switch strings.ToLower(unit) {
		case "k", "m", "g", "t":
			u := strings.ToUpper(unit)
			return 0, fmt.Errorf("size %q is ambiguous: write %s%siB (binary, 1024-based) or %s%sB (decimal, 1000-based)", in, num, u, num, u)
		}
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", in, unit)
	}
	if strings.Count(num, ".") > 1 || num == "." {
		return 0, fmt.Errorf("size %q: malformed number", in)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || (n > 0 && n > math.MaxInt64/mult) {
			return 0, fmt.Errorf("size %q is too large", in)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: malformed number", in)
	}
	v := math.Round(f * float64(mult))
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", in)
	}
	return int64(v), nil
}

// FormatSize renders a byte count for people: binary units with two decimals
// ("7.50 GiB"), plain bytes under 1 KiB.
func FormatSize(n int64) string {
	neg := ""
	if n < 0 {
		neg, n = "-", -n
	}
	switch {
	case n >= 1<<40:
		return fmt.Sprintf("%s%.2f TiB", neg, float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%s%.2f GiB", neg, float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%s%.2f MiB", neg, float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%s%.2f KiB", neg, float64(n)/(1<<10))
	}
	return fmt.Sprintf("%s%d B", neg, n)
}

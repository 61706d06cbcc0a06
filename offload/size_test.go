package offload

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"123", 123},
		{"123B", 123},
		{"1KiB", 1024},
		{"1KB", 1000},
		{"8GiB", 8 << 30},
		{"8 GiB", 8 << 30},
		{"  8GiB  ", 8 << 30},
		{"8gib", 8 << 30},
		{"8GB", 8e9},
		{"8gb", 8e9},
		{"8Gb", 8e9}, // bytes, never bits
		{"512MiB", 512 << 20},
		{"512MB", 512e6},
		{"1.5GiB", 3 << 29},
		{"0.5KiB", 512},
		{"2TiB", 2 << 40},
		{"1TB", 1e12},
		{".5MiB", 1 << 19},
		{"1.0000000001B", 1}, // rounded to a byte
	}
	for _, c := range good {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", "empty"},
		{"   ", "empty"},
		{"GiB", "want a number"},
		{"-8GiB", "want a number"},
		{"8G", "ambiguous: write 8GiB (binary, 1024-based) or 8GB (decimal"},
		{"8g", "ambiguous"},
		{"16M", "ambiguous"},
		{"4k", "ambiguous"},
		{"8XB", "unknown unit"},
		{"8 GiB extra", "unknown unit"},
		{"8GiBs", "unknown unit"},
		{"8  GiB", "spacing"},
		{"1.2.3GiB", "malformed"},
		{".", "malformed"},
		{"1e9", "unknown unit"},
		{"99999999999TiB", "too large"},
		{"9223372036854775808", "too large"},
		{"nan", "want a number"},
		{"0x10", "unknown unit"},
	}
	for _, c := range bad {
		got, err := ParseSize(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error containing %q", c.in, got, err, c.msg)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 3 << 29: "1.50 GiB", 411058176: "392.02 MiB",
		-(2 << 30): "-2.00 GiB", 2 << 40: "2.00 TiB",
	} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

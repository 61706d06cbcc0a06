package weights

import (
	"bytes"
	"os"
	"testing"
)

// FromBytes (the safetensors header pass and validation) never panics, and
// every tensor it accepts lies inside the data with the size its dtype and
// shape say.
func FuzzFromBytes(f *testing.F) {
	if b, err := os.ReadFile("../../testdata/tiny/mimi.safetensors"); err == nil && len(b) < 1<<20 {
		f.Add(b)
	}
	var buf bytes.Buffer
	t := &Tensor{Name: "a", DType: F32, Shape: []int{2, 3}, Data: make([]byte, 24)}
	if err := Write(&buf, []*Tensor{t}, map[string]string{"format": "pt"}); err == nil {
		f.Add(buf.Bytes())
	}
	f.Add([]byte("\x08\x00\x00\x00\x00\x00\x00\x00{}      "))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := FromBytes("fuzz", data)
		if err != nil {
			return
		}
		for _, n := range file.Names() {
			tt, err := file.Get(n)
			if err != nil {
				t.Fatalf("listed tensor %q: %v", n, err)
			}
			if sz := tt.DType.Size(); sz > 0 && len(tt.Data) != tt.Numel()*sz {
				t.Fatalf("tensor %q: %d bytes for %v %s", n, len(tt.Data), tt.Shape, tt.DType)
			}
		}
	})
}

package voices

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	tinyPT     = "../testdata/tiny/voices/TINYF0.pt"
	tinyBF16PT = "../testdata/tiny/voices/TINYF0-bf16.pt"
)

// Values read independently of this package from the raw storage files:
//
//	z = zipfile.ZipFile("TINYF0.pt"); e = z.read("TINYF0/data/0")
//	struct.unpack("<1536f", e)[row*64 + col]
//
// (and for TINYF0-bf16.pt: struct.unpack("<f", b"\0\0" + b[2*i:2*i+2])),
// cache = struct.unpack("<68q", z.read("TINYF0/data/1")) as 17 rows of 4.
var spot = []struct {
	row, col int
	f32, bf  float32
}{
	{0, 0, -1.16162109375, -1.1640625},
	{0, 1, -0.7662353515625, -0.765625},
	{0, 63, -2.818359375, -2.8125},
	{1, 0, 0.42041015625, 0.419921875},
	{12, 9, -6.30194091796875, -6.3125},
	{23, 63, 7.114131927490234, 7.125},
}

var wantCache = [][]int64{
	{3, 3, 3, 3}, {947, 1111, 636, 1790}, {1261, 1422, 18, 1336}, {1891, 394, 1633, 1033},
	{842, 1631, 956, 1347}, {1303, 110, 1361, 2007}, {1834, 1375, 745, 228}, {1260, 140, 1436, 955},
	{127, 418, 1840, 507}, {430, 430, 430, 430}, {1268, 1268, 1268, 1268}, {381, 381, 381, 381},
	{1611, 1611, 1611, 1611}, {1095, 1095, 1095, 1095}, {1495, 1495, 1495, 1495}, {56, 56, 56, 56},
	{472, 472, 472, 472},
}

func checkTiny(t *testing.T, p *Prompt, bf bool) {
	t.Helper()
	if len(p.Embeddings) != 24 {
		t.Fatalf("%d embedding rows, want 24", len(p.Embeddings))
	}
	for i, r := range p.Embeddings {
		if len(r) != 64 {
			t.Fatalf("row %d has %d values, want 64", i, len(r))
		}
	}
	for _, s := range spot {
		want := s.f32
		if bf {
			want = s.bf
		}
		if got := p.Embeddings[s.row][s.col]; got != want {
			t.Errorf("embeddings[%d][%d] = %v, want %v", s.row, s.col, got, want)
		}
	}
	if len(p.Cache) != 17 {
		t.Fatalf("%d cache rows", len(p.Cache))
	}
	for i := range wantCache {
		for j := range wantCache[i] {
			if len(p.Cache[i]) != 4 || p.Cache[i][j] != wantCache[i][j] {
				t.Fatalf("cache row %d = %v, want %v", i, p.Cache[i], wantCache[i])
			}
		}
	}
}

func TestLoadTINYF0(t *testing.T) {
	p, err := LoadPT(tinyPT)
	if err != nil {
		t.Fatal(err)
	}
	checkTiny(t, p, false)

	b, err := LoadPT(tinyBF16PT)
	if err != nil {
		t.Fatal(err)
	}
	checkTiny(t, b, true)
	// The bf16 file is the f32 one cast with torch's round-to-nearest-even:
	// widening it back must give exactly that rounding of every value.
	for i := range p.Embeddings {
		for j, v := range p.Embeddings[i] {
			bits := math.Float32bits(v)
			bits = (bits + 0x7fff + (bits>>16)&1) &^ 0xffff
			if w := math.Float32frombits(bits); b.Embeddings[i][j] != w {
				t.Fatalf("bf16[%d][%d] = %v, want bf16(%v) = %v", i, j, b.Embeddings[i][j], v, w)
			}
		}
	}
}

// rezip rewrites a .pt archive entry by entry with torch's layout; edit may
// change an entry's name or data, or drop it (return ok=false).
func rezip(t testing.TB, src []byte, edit func(name string, data []byte) (string, []byte, bool)) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := &torchZip{w: &out}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		name, data, ok := edit(f.Name, data)
		if ok {
			zw.record(name, data)
		}
	}
	if err := zw.finish(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// editPickle applies a byte replacement to data.pkl (which must match once).
func editPickle(t testing.TB, src []byte, old, new string) []byte {
	t.Helper()
	return rezip(t, src, func(name string, data []byte) (string, []byte, bool) {
		if strings.HasSuffix(name, "/data.pkl") {
			if bytes.Count(data, []byte(old)) != 1 {
				t.Fatalf("%q occurs %d times in data.pkl", old, bytes.Count(data, []byte(old)))
			}
			data = bytes.Replace(data, []byte(old), []byte(new), 1)
		}
		return name, data, true
	})
}

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A voice prompt saved on a GPU: the reference saves the cache without
// .cpu(), so its storage location is "cuda:0" (the embeddings were moved to
// the CPU). Also a file with every storage on cuda:1.
func TestLoadCUDALocation(t *testing.T) {
	src := readFile(t, tinyPT)
	// In the cache's persistent id the location is a memo reference to the
	// embeddings' 'cpu' (BINGET 6) followed by the numel 68 (K 0x44).
	cuda := editPickle(t, src, "h\x06KD", "X\x06\x00\x00\x00cuda:0KD")
	p, err := DecodePT(cuda, "cuda.pt")
	if err != nil {
		t.Fatal(err)
	}
	checkTiny(t, p, false)

	all := editPickle(t, src, "X\x03\x00\x00\x00cpu", "X\x06\x00\x00\x00cuda:1")
	p, err = DecodePT(all, "cuda1.pt")
	if err != nil {
		t.Fatal(err)
	}
	checkTiny(t, p, false)
}

func TestRefuseMaliciousPickles(t *testing.T) {
	src := readFile(t, tinyPT)
	for _, tc := range []struct {
		name, pkl, want string
	}{
		{"os.system", "\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.", "refusing to load global os.system"},
		{"posix.system", "\x80\x02cposix\nsystem\nX\x02\x00\x00\x00id\x85R.", "refusing to load global posix.system"},
		{"builtins.eval", "\x80\x02cbuiltins\neval\nX\x01\x00\x00\x001\x85R.", "refusing to load global builtins.eval"},
		{"__builtin__.object", "\x80\x02c__builtin__\nobject\n).", "refusing to load global __builtin__.object"},
		{"copy_reg._reconstructor", "\x80\x02ccopy_reg\n_reconstructor\n).", "refusing to load global copy_reg._reconstructor"},
		{"INST os.system", "(X\x02\x00\x00\x00idios\nsystem\n.", "refusing to load global os.system"},
		{"STACK_GLOBAL", "\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x94\x8c\x02id\x85R.", "refusing to load global os.system"},
		{"STACK_GLOBAL memo", "\x80\x04\x8c\x02os\x94\x8c\x06system\x94h\x00h\x01\x93.", "refusing to load global os.system"},
		{"STACK_GLOBAL computed", "\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x85\x8c\x01x\x93.", "STACK_GLOBAL at byte 20 with a computed name"},
		{"torch other", "\x80\x02ctorch\nload\n).", "refusing to load global torch.load"},
		{"torch._utils other", "\x80\x02ctorch._utils\n_rebuild_device_tensor_from_numpy\n).", "refusing to load global torch._utils._rebuild_device_tensor_from_numpy"},
		{"framed", "\x80\x04\x95\x0d\x00\x00\x00\x00\x00\x00\x00cos\nsystem\n).", "refusing to load global os.system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := rezip(t, src, func(name string, data []byte) (string, []byte, bool) {
				if strings.HasSuffix(name, "/data.pkl") {
					data = []byte(tc.pkl)
				}
				return name, data, true
			})
			_, err := DecodePT(bad, "evil.pt")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "evil.pt: ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q", err)
			}
		})
	}
	// The unpickler's own FindClass hook refuses too (defence in depth).
	for _, g := range [][2]string{{"os", "system"}, {"builtins", "exec"}, {"subprocess", "Popen"}, {"torch", "Tensor"}} {
		if _, err := allowedGlobal(g[0], g[1]); err == nil {
			t.Errorf("%s.%s allowed", g[0], g[1])
		}
	}
}

func TestCorruptFiles(t *testing.T) {
	src := readFile(t, tinyPT)
	flip := func(off int) []byte {
		b := append([]byte(nil), src...)
		b[off] ^= 0x55
		return b
	}
	replaceEntry := func(suffix string, data []byte) []byte {
		return rezip(t, src, func(name string, d []byte) (string, []byte, bool) {
			if strings.HasSuffix(name, suffix) {
				return name, data, data != nil
			}
			return name, d, true
		})
	}
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "not a torch .pt file (not a zip archive)"},
		{"text", []byte("hello world"), "not a torch .pt file (not a zip archive)"},
		{"wav", readFile(t, "../testdata/tiny/voices/TINYF0.wav"), "not a torch .pt file (not a zip archive)"},
		{"legacy", []byte("\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03."), "legacy (pre-1.6, non-zip) torch.save format"},
		{"truncated zip", src[:len(src)/2], "not a readable zip archive"},
		{"cut end", src[:len(src)-30], "not a readable zip archive"},
		{"crc", flip(1000), "checksum error"},
		{"pickle crc", flip(70), "checksum error"},
		{"no folder", rezip(t, src, func(name string, d []byte) (string, []byte, bool) {
			return strings.TrimPrefix(name, "TINYF0/"), d, true
		}), `zip entry "data.pkl" is not inside a top folder`},
		{"missing data.pkl", replaceEntry("/data.pkl", nil), "missing TINYF0/data.pkl"},
		{"missing storage", replaceEntry("/data/1", nil), `missing TINYF0/data/1 (storage "1" of the pickle)`},
		{"short storage", replaceEntry("/data/0", make([]byte, 100)), "TINYF0/data/0 holds 100 bytes, the pickle declares 1536 × float32 = 6144 bytes"},
		{"pickle without STOP", replaceEntry("/data.pkl", []byte("\x80\x02}q\x00")), "pickle ends without STOP"},
		{"pickle huge length", replaceEntry("/data.pkl", []byte("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f.")), "needs 9223372036854775807 bytes"},
		{"pickle bad opcode", replaceEntry("/data.pkl", []byte("\x80\x02\xff.")), "unknown pickle opcode 0xff"},
		{"pickle empty long", replaceEntry("/data.pkl", []byte("\x80\x02\x8a\x00.")), "empty LONG payload"},
		{"pickle odd dict", replaceEntry("/data.pkl", []byte("(K\x01d.")), "malformed pickle"},
		{"pickle unhashable key", replaceEntry("/data.pkl", []byte("\x80\x03ccollections\nOrderedDict\n)RC\x01aK\x01s.")), "malformed pickle"},
		{"not a dict", replaceEntry("/data.pkl", []byte("\x80\x02K\x01.")), "data.pkl holds int, not a dict"},
		{"empty dict", replaceEntry("/data.pkl", []byte("\x80\x02}.")), `missing key "embeddings" (the dict is empty)`},
		{"missing key", editPickle(t, src, "X\x05\x00\x00\x00cache", "X\x05\x00\x00\x00cachf"), `missing key "cache" (keys: "embeddings", "cachf")`},
		{"not a tensor", replaceEntry("/data.pkl", []byte("\x80\x02}(X\n\x00\x00\x00embeddingsK\x01X\x05\x00\x00\x00cacheK\x02u.")), `"embeddings" is int, not a tensor`},
		{"wrong cache shape", editPickle(t, src, "K\x01K\x11K\x04\x87", "K\x01K\x10K\x04\x87"), `"cache" has shape [1 16 4], want [1, 17, cols]`},
		{"wrong emb shape", editPickle(t, src, "(K\x18K\x01K\x01K@tq\x08(K@K@K@K\x01t", "K\x18K\x01K@\x87q\x08K@K@K\x01\x87"), `"embeddings" has shape [24 1 64], want [N, 1, 1, dim]`},
		{"rank mismatch", editPickle(t, src, "(K\x18K\x01K\x01K@t", "(K\x18K\x01K@K\x01K\x01t"), "differ in rank"},
		{"view past storage", editPickle(t, src, "(K\x18K\x01K\x01K@t", "(K\x18K\x02K\x01K@t"), "tensor view (offset 0, size [24 2 1 64], stride [64 64 64 1]) needs 1600 elements, storage \"0\" has 1536"},
		{"expanded view", editPickle(t, src, "(K\x18K\x01K\x01K@tq\x08(K@K@K@K\x01t", "(J\x00\x00\x00\x01K\x01K\x01K@tq\x08(K\x00K\x00K\x00K\x01t"), "has 1073741824 elements, more than the 1536 of storage \"0\": expanded views are not supported"},
		{"offset past storage", editPickle(t, src, "QK\x00(", "QK\x01("), "needs 1537 elements"},
		{"float cache", editPickle(t, src, "LongStorage", "HalfStorage"), `"cache" is float16, want an integer (int64) tensor`},
		{"int embeddings", editPickle(t, src, "FloatStorage", "ShortStorage"), `"embeddings" is int16, want a floating-point tensor`},
		{"unknown storage", editPickle(t, src, "FloatStorage", "FooieStorage"), "refusing to load global torch.FooieStorage"},
		{"bad persistent id", editPickle(t, src, "X\x07\x00\x00\x00storage", "X\x07\x00\x00\x00storagf"), `unsupported persistent id type "storagf"`},
		{"storage path escape", editPickle(t, src, "X\x01\x00\x00\x000q", "X\x01\x00\x00\x00/q"), "bad storage key/location"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodePT(tc.file, "bad.pt")
			if err == nil {
				t.Fatalf("no error (%d rows)", len(p.Embeddings))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "bad.pt: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q", msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
		})
	}
}

func TestLoadPTFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadPT(filepath.Join(dir, "nope.pt")); err == nil || !strings.Contains(err.Error(), "nope.pt") {
		t.Errorf("missing: %v", err)
	}
	if _, err := LoadPT(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("dir: %v", err)
	}
	p := filepath.Join(dir, "x.pt")
	os.WriteFile(p, []byte("garbage"), 0o644)
	if _, err := LoadPT(p); err == nil || err.Error() != p+": not a torch .pt file (not a zip archive)" {
		t.Errorf("garbage: %v", err)
	}
}

// Saving what was loaded reproduces torch 1.13's file byte for byte (leaving
// out the byteorder record that torch ≥ 2.1 adds and that SavePT writes).
func TestEncodeMatchesTorch(t *testing.T) {
	want := readFile(t, tinyPT)
	p, err := DecodePT(want, "TINYF0.pt")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := encodePT(&got, "TINYF0", p, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("encodePT without byteorder differs from torch.save's TINYF0.pt")
	}
}

func TestSavePTRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src, err := LoadPT(tinyPT)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "MyVoice.pt")
	if err := SavePT(path, src); err != nil {
		t.Fatal(err)
	}
	got, err := LoadPT(path)
	if err != nil {
		t.Fatal(err)
	}
	checkTiny(t, got, false)

	// Layout: torch's records under the stem, data 64-byte aligned, and the
	// same data.pkl / storages as torch wrote.
	raw := readFile(t, path)
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := zip.NewReader(bytes.NewReader(readFile(t, tinyPT)), 7651)
	names := []string{"MyVoice/data.pkl", "MyVoice/byteorder", "MyVoice/data/0", "MyVoice/data/1", "MyVoice/version"}
	if len(zr.File) != len(names) {
		t.Fatalf("%d entries", len(zr.File))
	}
	for i, f := range zr.File {
		if f.Name != names[i] || f.Method != zip.Store {
			t.Errorf("entry %d: %s method %d", i, f.Name, f.Method)
		}
		off, err := f.DataOffset()
		if err != nil || off%64 != 0 {
			t.Errorf("%s: data at %d (%v)", f.Name, off, err)
		}
		rc, _ := f.Open()
		data, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		switch rest := strings.TrimPrefix(f.Name, "MyVoice/"); rest {
		case "byteorder":
			if string(data) != "little" {
				t.Errorf("byteorder %q", data)
			}
		default:
			for _, o := range orig.File {
				if o.Name == "TINYF0/"+rest {
					orc, _ := o.Open()
					od, _ := io.ReadAll(orc)
					if !bytes.Equal(od, data) {
						t.Errorf("%s differs from torch's %s", f.Name, o.Name)
					}
				}
			}
		}
	}
	// Nothing else left in the directory (the temporary file was renamed).
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries", len(ents))
	}

	// Arbitrary values (NaN payloads, extremes) survive exactly.
	q := &Prompt{Embeddings: [][]float32{{1, float32(math.Copysign(0, -1)), float32(math.Inf(-1)), math.Float32frombits(0x7fc01234)}, {math.SmallestNonzeroFloat32, math.MaxFloat32, 3.25, -7}}}
	for i := 0; i < NumStreams; i++ {
		q.Cache = append(q.Cache, []int64{int64(i), math.MaxInt64, math.MinInt64, -1, 2048, 70000})
	}
	if err := SavePT(path, q); err != nil { // overwrites
		t.Fatal(err)
	}
	r, err := LoadPT(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range q.Embeddings {
		for j := range q.Embeddings[i] {
			if math.Float32bits(r.Embeddings[i][j]) != math.Float32bits(q.Embeddings[i][j]) {
				t.Errorf("embeddings[%d][%d] = %v, want %v", i, j, r.Embeddings[i][j], q.Embeddings[i][j])
			}
		}
	}
	for i := range q.Cache {
		for j := range q.Cache[i] {
			if r.Cache[i][j] != q.Cache[i][j] {
				t.Errorf("cache[%d][%d] = %d, want %d", i, j, r.Cache[i][j], q.Cache[i][j])
			}
		}
	}
}

func TestSavePTErrors(t *testing.T) {
	dir := t.TempDir()
	good, _ := LoadPT(tinyPT)
	bad := []*Prompt{
		nil,
		{Cache: good.Cache},
		{Embeddings: [][]float32{{}}, Cache: good.Cache},
		{Embeddings: [][]float32{{1, 2}, {3}}, Cache: good.Cache},
		{Embeddings: good.Embeddings, Cache: good.Cache[:16]},
		{Embeddings: good.Embeddings, Cache: append(append([][]int64{}, good.Cache[:16]...), []int64{1})},
		{Embeddings: good.Embeddings, Cache: make([][]int64, NumStreams)},
	}
	for i, p := range bad {
		path := filepath.Join(dir, "bad.pt")
		if err := SavePT(path, p); err == nil {
			t.Errorf("case %d: saved", i)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("case %d: left a file behind", i)
		}
	}
	if err := SavePT(filepath.Join(dir, "no", "such", "dir.pt"), good); err == nil {
		t.Error("saved into a missing directory")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%d files left behind", len(ents))
	}
}

// Half-precision embeddings load too (torch.HalfStorage).
func TestLoadHalfEmbeddings(t *testing.T) {
	src := readFile(t, tinyPT)
	f16 := rezip(t, src, func(name string, data []byte) (string, []byte, bool) {
		switch {
		case strings.HasSuffix(name, "/data.pkl"):
			data = bytes.Replace(data, []byte("FloatStorage"), []byte("HalfStorage"), 1)
		case strings.HasSuffix(name, "/data/0"):
			// 1536 halves: value i → 0x3c00 (1.0) for even i, 0xc000 (−2) for odd.
			data = make([]byte, 2*1536)
			for i := 0; i < 1536; i++ {
				h := uint16(0x3c00)
				if i%2 == 1 {
					h = 0xc000
				}
				data[2*i], data[2*i+1] = byte(h), byte(h>>8)
			}
		}
		return name, data, true
	})
	p, err := DecodePT(f16, "f16.pt")
	if err != nil {
		t.Fatal(err)
	}
	if p.Embeddings[0][0] != 1 || p.Embeddings[0][1] != -2 || p.Embeddings[23][63] != -2 {
		t.Errorf("got %v … %v", p.Embeddings[0][:2], p.Embeddings[23][63])
	}
}

// A file declaring more rows than allowed (a 1 MB zip once declared 4M rows
// over a zero-stride storage: 8 GB) is refused before anything is
// allocated; so is a width other than the model's; NaN and infinite
// embeddings are refused when a run asks for finite ones.
func TestLoadPTLimits(t *testing.T) {
	p, err := LoadPT(tinyPT)
	if err != nil {
		t.Fatal(err)
	}
	rows, dim := len(p.Embeddings), len(p.Embeddings[0])
	if _, err := LoadPTLimits(tinyPT, Limits{MaxRows: rows, Dim: dim, Finite: true}); err != nil {
		t.Fatalf("within the limits: %v", err)
	}
	for l, want := range map[Limits]string{
		{MaxRows: rows - 1}: fmt.Sprintf("has %d rows", rows),
		{Dim: dim + 1}:      fmt.Sprintf("dimension %d, the model's dim is %d", dim, dim+1),
	} {
		if _, err := LoadPTLimits(tinyPT, l); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), tinyPT+": ") {
			t.Errorf("%+v: %v, want %q", l, err, want)
		}
	}
	dir := t.TempDir()
	for i, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		q := &Prompt{Embeddings: [][]float32{{1, 2}, {3, bad}}, Cache: p.Cache}
		path := filepath.Join(dir, fmt.Sprintf("bad%d.pt", i))
		if err := SavePT(path, q); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPTLimits(path, Limits{Finite: true}); err == nil || !strings.Contains(err.Error(), "row 1 holds") {
			t.Errorf("%v embedding: %v", bad, err)
		}
		if _, err := LoadPT(path); err != nil {
			t.Errorf("the format carries %v: %v", bad, err)
		}
	}
}

package voices

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// scanPickle checks a pickle before gopickle runs it, without executing
// anything: every opcode must be known, every argument (lengths included) must
// fit in the data, the stream must end with STOP, and every global it names
// (GLOBAL, INST, and STACK_GLOBAL whose module and name are the two strings
// pushed just before it, as Python's pickler writes them) must be on the
// allow-list. This keeps gopickle away from the inputs it does not check
// itself (huge length prefixes, opcode 0xff, empty LONG payloads) and makes
// the allow-list cover the globals gopickle would otherwise resolve on its
// own (__builtin__.object, copy_reg._reconstructor).
func scanPickle(b []byte) error {
	const (
		argNone = iota
		arg1
		arg2
		arg4
		arg8
		argLine
		arg2Lines
		argLen1
		argLen4
		argLen8
	)
	var kinds [256]int8
	for i := range kinds {
		kinds[i] = -1
	}
	set := func(ops string, k int) {
		for i := 0; i < len(ops); i++ {
			kinds[ops[i]] = int8(k)
		}
	}
	set("(.012NQRabdelost)u}]", argNone)
	set("\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98", argNone)
	set("Khq\x80\x82", arg1)
	set("M\x83", arg2)
	set("Jjr\x84", arg4)
	set("G\x95", arg8)
	set("FILPSVgp", argLine)
	set("ci", arg2Lines)
	set("UC\x8c\x8a", argLen1)
	set("TXB\x8b", argLen4)
	set("\x8d\x8e\x96", argLen8)

	le := binary.LittleEndian
	// Strings pushed by the last opcodes (nil entry: something else), and
	// the memo of strings, to check STACK_GLOBAL names.
	var recent []*string
	memoStr := map[uint64]*string{}
	memoLen := uint64(0)
	memoSeen := map[uint64]bool{}
	var lastPushed *string
	push := func(s *string) {
		recent = append(recent, s)
		if len(recent) > 2 {
			recent = recent[1:]
		}
		lastPushed = s
	}
	memoPut := func(i uint64) {
		if !memoSeen[i] {
			memoSeen[i] = true
			memoLen++
		}
		memoStr[i] = lastPushed
	}

	pos := 0
	for pos < len(b) {
		op := b[pos]
		at := pos
		pos++
		k := kinds[op]
		if k < 0 {
			return fmt.Errorf("unknown pickle opcode 0x%02x at byte %d", op, at)
		}
		need := func(n uint64) error {
			if n > uint64(len(b)-pos) {
				return fmt.Errorf("pickle opcode 0x%02x at byte %d needs %d bytes, only %d left", op, at, n, len(b)-pos)
			}
			return nil
		}
		line := func() (string, error) {
			i := bytes.IndexByte(b[pos:], '\n')
			if i < 0 {
				return "", fmt.Errorf("pickle opcode %q at byte %d: unterminated line", op, at)
			}
			s := string(b[pos : pos+i])
			pos += i + 1
			return s, nil
		}
		var arg uint64
		var str *string
		switch k {
		case argNone:
		case arg1, arg2, arg4, arg8:
			n := map[int8]uint64{arg1: 1, arg2: 2, arg4: 4, arg8: 8}[k]
			if err := need(n); err != nil {
				return err
			}
			switch n {
			case 1:
				arg = uint64(b[pos])
			case 2:
				arg = uint64(le.Uint16(b[pos:]))
			case 4:
				arg = uint64(le.Uint32(b[pos:]))
			case 8:
				arg = le.Uint64(b[pos:])
			}
			pos += int(n)
		case argLine:
			s, err := line()
			if err != nil {
				return err
			}
			str = &s
		case arg2Lines:
			mod, err := line()
			if err != nil {
				return err
			}
			name, err := line()
			if err != nil {
				return err
			}
			if _, err := allowedGlobal(mod, name); err != nil {
				return err
			}
		case argLen1, argLen4, argLen8:
			var n uint64
			switch k {
			case argLen1:
				if err := need(1); err != nil {
					return err
				}
				n = uint64(b[pos])
				pos++
			case argLen4:
				if err := need(4); err != nil {
					return err
				}
				v := le.Uint32(b[pos:])
				if (op == 'T' || op == 0x8b) && int32(v) < 0 {
					return fmt.Errorf("pickle opcode 0x%02x at byte %d: negative length", op, at)
				}
				n = uint64(v)
				pos += 4
			case argLen8:
				if err := need(8); err != nil {
					return err
				}
				n = le.Uint64(b[pos:])
				pos += 8
			}
			if err := need(n); err != nil {
				return err
			}
			if (op == 0x8a || op == 0x8b) && n == 0 {
				return fmt.Errorf("pickle opcode 0x%02x at byte %d: empty LONG payload", op, at)
			}
			if op == 'X' || op == 0x8c || op == 0x8d || op == 'U' || op == 'T' {
				s := string(b[pos : pos+int(n)])
				str = &s
			}
			pos += int(n)
		}

		switch op {
		case '.': // STOP
			return nil
		case 'X', 0x8c, 0x8d, 'U', 'T', 'V', 'S': // strings
			push(str)
		case 'q', 'r': // BINPUT, LONG_BINPUT
			memoPut(arg)
		case 'p': // PUT
			var i uint64
			if _, err := fmt.Sscanf(*str, "%d", &i); err != nil {
				return fmt.Errorf("pickle PUT at byte %d: bad index %q", at, printable(*str))
			}
			memoPut(i)
		case 0x94: // MEMOIZE
			memoPut(memoLen)
		case 'h', 'j': // BINGET, LONG_BINGET
			push(memoStr[arg])
		case 'g': // GET
			var i uint64
			if _, err := fmt.Sscanf(*str, "%d", &i); err != nil {
				return fmt.Errorf("pickle GET at byte %d: bad index %q", at, printable(*str))
			}
			push(memoStr[i])
		case 0x93: // STACK_GLOBAL
			if len(recent) < 2 || recent[0] == nil || recent[1] == nil {
				return fmt.Errorf("pickle STACK_GLOBAL at byte %d with a computed name: refused", at)
			}
			if _, err := allowedGlobal(*recent[0], *recent[1]); err != nil {
				return err
			}
			push(nil)
		case 0x95: // FRAME: its content is scanned as the following opcodes
			if arg > uint64(len(b)-pos) {
				return fmt.Errorf("pickle FRAME at byte %d claims %d bytes, only %d left", at, arg, len(b)-pos)
			}
		case '(': // MARK pushes nothing visible to STACK_GLOBAL's pattern
			push(nil)
		default:
			push(nil)
		}
	}
	return fmt.Errorf("pickle ends without STOP")
}

package jsonl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// zstdTestBlockSize is the block size klauspost's encoder uses at the default level (128 KiB).
const zstdTestBlockSize = 128 << 10

// newTestZstdCodec returns a codec or fails the test.
func newTestZstdCodec(tb testing.TB) *zstdCodec {
	tb.Helper()
	c, err := newZstdCodec()
	require.NoError(tb, err)
	return c
}

// variedJSONL returns at least size bytes of newline-terminated, pseudo-random JSON-ish lines from a fixed
// seed: varied enough that the compressed frame is large, regular enough that it is still compressed.
func variedJSONL(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
	words := []string{"alpha", "tool/call", "assistant", "step/start", "turn/end", "résumé", "日本語", "zebra",
		"\\\"quoted\\\"", "callId", "outcome", "delta", "ω", "seq", "data", "sessionflow"}
	var b bytes.Buffer
	for seq := 0; b.Len() < size; seq++ {
		fmt.Fprintf(&b, `{"seq":%d,"type":"assistant/message","data":{"text":"`, seq)
		for n := 3 + r.IntN(30); n > 0; n-- {
			if r.IntN(3) == 0 {
				b.WriteString(strconv.FormatUint(r.Uint64(), 36))
			} else {
				b.WriteString(words[r.IntN(len(words))])
			}
			b.WriteByte(' ')
		}
		b.WriteString("\"}}\n")
	}
	return b.Bytes()
}

// zstdTestLog is a concatenation of frames with their plaintexts and spans.
type zstdTestLog struct {
	data   []byte
	plains [][]byte
	spans  []frameSpan
}

// buildZstdTestLog encodes each plaintext as one frame and concatenates them.
func buildZstdTestLog(tb testing.TB, c *zstdCodec, plains ...[]byte) zstdTestLog {
	tb.Helper()
	var l zstdTestLog
	for _, p := range plains {
		start := int64(len(l.data))
		l.data = c.encodeFrame(l.data, p)
		l.plains = append(l.plains, p)
		l.spans = append(l.spans, frameSpan{start: start, end: int64(len(l.data))})
	}
	return l
}

// standardZstdTestLog is a header frame plus three batch frames, the second one multi-block (300 KiB).
func standardZstdTestLog(tb testing.TB, c *zstdCodec) zstdTestLog {
	tb.Helper()
	header := []byte(`{"type":"header","version":3,"id":"s1","cwd":"/tmp/project","createdAt":1700000000000}` + "\n")
	return buildZstdTestLog(tb, c,
		header,
		variedJSONL(1, 600),
		variedJSONL(2, 300<<10),
		variedJSONL(3, 2000),
	)
}

// zstdBlockInfo describes one block of a frame: its header offset (relative to the frame start), type,
// and the offset just past it.
type zstdBlockInfo struct {
	start, end int64
	typ        int
}

// zstdTestBlocks lists the blocks of one complete frame, independently of the code under test's block walker.
func zstdTestBlocks(tb testing.TB, frame []byte) (headerSize int64, blocks []zstdBlockInfo) {
	tb.Helper()
	h, complete, err := parseZstdFrameHeader(frame, 0)
	require.NoError(tb, err)
	require.True(tb, complete)
	pos := h.size
	for {
		require.LessOrEqual(tb, pos+3, int64(len(frame)))
		v := uint32(frame[pos]) | uint32(frame[pos+1])<<8 | uint32(frame[pos+2])<<16
		typ := int(v>>1) & 3
		size := int64(v >> 3)
		if typ == 1 {
			size = 1
		}
		blocks = append(blocks, zstdBlockInfo{start: pos, end: pos + 3 + size, typ: typ})
		pos += 3 + size
		if v&1 != 0 {
			return h.size, blocks
		}
	}
}

// wantRecoveredLen is how much plaintext recoverTornFrame must salvage from the first rel bytes of frame:
// the output of every complete block (each non-last block holds zstdTestBlockSize bytes, as both klauspost
// and libzstd write them; a complete last block completes the plaintext), plus the available payload of a
// torn raw block.
func wantRecoveredLen(tb testing.TB, frame []byte, plainLen int, rel int64) int {
	tb.Helper()
	hdrSize, blocks := zstdTestBlocks(tb, frame)
	want := 0
	if rel < hdrSize {
		return 0
	}
	for i, blk := range blocks {
		if blk.end > rel {
			if blk.typ == zstdBlockRaw && rel > blk.start+3 {
				want += int(rel - blk.start - 3)
			}
			return want
		}
		if i == len(blocks)-1 {
			return plainLen
		}
		want += zstdTestBlockSize
	}
	return want
}

// TestZstdFrameRoundTrip checks one frame per plaintext, the header fields encodeFrame must write, and
// that decodeFrame returns the plaintext.
func TestZstdFrameRoundTrip(t *testing.T) {
	c := newTestZstdCodec(t)
	for _, size := range []int{0, 1, 10, 255, 256, 1023, 1024, 1025, 65791, 65792, 200 << 10, 700 << 10} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			plain := variedJSONL(uint64(size), size)[:size]
			prefix := []byte("existing")
			out := c.encodeFrame(append([]byte(nil), prefix...), plain)
			require.True(t, bytes.HasPrefix(out, prefix), "encodeFrame must append to dst")
			frame := out[len(prefix):]

			spans, torn, err := scanZstdFrames(frame)
			require.NoError(t, err)
			assert.Equal(t, int64(-1), torn)
			require.Equal(t, []frameSpan{{0, int64(len(frame))}}, spans, "exactly one frame")

			h, complete, err := parseZstdFrameHeader(frame, 0)
			require.NoError(t, err)
			require.True(t, complete)
			assert.True(t, h.checksum(), "content checksum flag must be set")
			assert.True(t, h.hasContentSize, "frame content size must be written")
			assert.Equal(t, uint64(size), h.contentSize)

			got, err := c.decodeFrame(frame)
			require.NoError(t, err)
			assert.Equal(t, len(plain), len(got))
			assert.True(t, bytes.Equal(plain, got), "round trip must be exact")
		})
	}
}

// TestZstdEmptyFrameChecksum checks the hand-built empty frame against an independent klauspost decoder
// that verifies its checksum.
func TestZstdEmptyFrameChecksum(t *testing.T) {
	c := newTestZstdCodec(t)
	frame := c.encodeFrame(nil, nil)
	require.Equal(t, zstdEmptyFrame, frame)
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer dec.Close()
	got, err := dec.DecodeAll(frame, nil)
	require.NoError(t, err)
	assert.Empty(t, got)

	bad := append([]byte(nil), frame...)
	bad[len(bad)-1] ^= 0x01
	_, err = c.decodeFrame(bad)
	require.Error(t, err, "the empty frame's checksum is really verified")
}

// TestZstdFramesManyRoundTrip checks that scanZstdFrames finds exactly the spans of a concatenation and
// that each span decodes to its plaintext.
func TestZstdFramesManyRoundTrip(t *testing.T) {
	c := newTestZstdCodec(t)
	l := standardZstdTestLog(t, c)
	var more [][]byte
	for i := range 20 {
		more = append(more, variedJSONL(uint64(100+i), 10+i*37))
	}
	l2 := buildZstdTestLog(t, c, append(append([][]byte(nil), l.plains...), more...)...)

	for _, log := range []zstdTestLog{l, l2} {
		spans, torn, err := scanZstdFrames(log.data)
		require.NoError(t, err)
		assert.Equal(t, int64(-1), torn)
		require.Equal(t, log.spans, spans)
		for i, s := range spans {
			got, err := c.decodeFrame(log.data[s.start:s.end])
			require.NoError(t, err)
			require.True(t, bytes.Equal(log.plains[i], got), "frame %d", i)
		}
	}

	// The large batch really is multi-block, which the truncation test relies on.
	s := l.spans[2]
	_, blocks := zstdTestBlocks(t, l.data[s.start:s.end])
	require.Len(t, blocks, 3)
}

// TestZstdScanEmptyInput checks that empty input is zero frames on a boundary.
func TestZstdScanEmptyInput(t *testing.T) {
	frames, torn, err := scanZstdFrames(nil)
	require.NoError(t, err)
	assert.Empty(t, frames)
	assert.Equal(t, int64(-1), torn)
}

// TestZstdFrameTruncation cuts a header frame + three batch frames at every offset of the small frames and
// at sampled offsets of the large one, checking the scan result and that torn-frame recovery yields a
// prefix of the torn frame's plaintext (and exactly the complete blocks' output).
func TestZstdFrameTruncation(t *testing.T) {
	c := newTestZstdCodec(t)
	l := standardZstdTestLog(t, c)

	cuts := map[int64]bool{}
	for i, s := range l.spans {
		_, blocks := zstdTestBlocks(t, l.data[s.start:s.end])
		if len(blocks) == 1 {
			for off := s.start; off <= s.end; off++ {
				cuts[off] = true
			}
			continue
		}
		t.Logf("frame %d: %d bytes, %d blocks", i, s.end-s.start, len(blocks))
		for off := s.start; off <= s.end; off += 97 {
			cuts[off] = true
		}
		around := []int64{0, s.end - s.start}
		for _, b := range blocks {
			around = append(around, b.start, b.end)
		}
		for _, a := range around {
			for d := int64(-32); d <= 32; d++ {
				if off := s.start + a + d; off >= s.start && off <= s.end {
					cuts[off] = true
				}
			}
		}
	}

	for _, cut := range slices.Sorted(maps.Keys(cuts)) {
		b := l.data[:cut]
		frames, torn, err := scanZstdFrames(b)
		require.NoError(t, err, "cut %d", cut)

		var want []frameSpan
		wantTorn := int64(-1)
		tornIdx := -1
		for i, s := range l.spans {
			if s.end <= cut {
				want = append(want, s)
			} else if s.start < cut {
				wantTorn, tornIdx = s.start, i
			}
		}
		require.Equal(t, want, frames, "cut %d", cut)
		require.Equal(t, wantTorn, torn, "cut %d", cut)
		if torn < 0 {
			continue
		}

		frame := l.data[l.spans[tornIdx].start:l.spans[tornIdx].end]
		plain := l.plains[tornIdx]
		partial := l.data[torn:cut]
		rec := c.recoverTornFrame(partial)
		require.True(t, bytes.HasPrefix(plain, rec), "cut %d: recovered %d bytes are not a prefix", cut, len(rec))

		rel := cut - torn
		wantLen := wantRecoveredLen(t, frame, len(plain), rel)
		require.Equal(t, wantLen, len(rec), "cut %d (frame %d, %d of %d bytes)", cut, tornIdx, rel, len(frame))
	}
}

// TestZstdRecoverTornRawBlock checks that the available payload of a torn raw block is recovered, as
// libzstd's streaming decoder does.
func TestZstdRecoverTornRawBlock(t *testing.T) {
	c := newTestZstdCodec(t)
	r := rand.New(rand.NewPCG(7, 7))
	plain := make([]byte, 5000)
	for i := range plain {
		plain[i] = byte(r.Uint32())
	}
	frame := c.encodeFrame(nil, plain)
	hdrSize, blocks := zstdTestBlocks(t, frame)
	require.Len(t, blocks, 1)
	require.Equal(t, zstdBlockRaw, blocks[0].typ, "incompressible input is stored as a raw block")

	for cut := int64(0); cut <= int64(len(frame)); cut++ {
		rec := c.recoverTornFrame(frame[:cut])
		require.True(t, bytes.HasPrefix(plain, rec), "cut %d", cut)
		switch {
		case cut < hdrSize+3:
			assert.Empty(t, rec, "cut %d", cut)
		case cut <= blocks[0].end:
			assert.Len(t, rec, int(cut-hdrSize-3), "cut %d", cut)
		default:
			assert.Len(t, rec, len(plain), "cut %d", cut)
		}
	}
}

// TestZstdRecoverTornFrameEdgeCases checks recovery of garbage, of a complete frame, and of a frame whose
// last complete block is corrupt.
func TestZstdRecoverTornFrameEdgeCases(t *testing.T) {
	c := newTestZstdCodec(t)
	assert.Nil(t, c.recoverTornFrame(nil))
	assert.Nil(t, c.recoverTornFrame([]byte("not a zstd frame at all")))
	assert.Nil(t, c.recoverTornFrame([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x08, 0, 0}), "reserved descriptor bit")

	plain := variedJSONL(9, 300<<10)
	frame := c.encodeFrame(nil, plain)
	assert.True(t, bytes.Equal(plain, c.recoverTornFrame(frame)), "a complete frame is recovered whole")

	// Corrupt the second block of a three-block frame, then tear the frame in the third block: the first
	// block's plaintext is still recovered and nothing wrong is returned.
	_, blocks := zstdTestBlocks(t, frame)
	require.Len(t, blocks, 3)
	bad := append([]byte(nil), frame[:blocks[2].start+10]...)
	for i := blocks[1].start + 3; i < blocks[1].start+40; i++ {
		bad[i] ^= 0xA5
	}
	rec := c.recoverTornFrame(bad)
	require.True(t, bytes.HasPrefix(plain, rec))
	assert.Len(t, rec, zstdTestBlockSize, "exactly the block before the corrupt one")
}

// TestZstdRecoverTornFrameMemoryBound checks that a torn frame declaring a huge content size (so a huge
// single-segment window) does not make recovery allocate that window.
func TestZstdRecoverTornFrameMemoryBound(t *testing.T) {
	c := newTestZstdCodec(t)
	// Single segment, checksum, 4-byte content size of 1 GiB; one raw block "hello world"; then a torn
	// compressed block.
	frame := []byte{0x28, 0xB5, 0x2F, 0xFD, 2<<6 | zstdFHDSingleSegment | zstdFHDChecksum}
	frame = binary.LittleEndian.AppendUint32(frame, 1<<30)
	v := uint32(11) << 3
	frame = append(frame, byte(v), byte(v>>8), byte(v>>16))
	frame = append(frame, "hello world"...)
	v = 2<<1 | 1000<<3
	frame = append(frame, byte(v), byte(v>>8), byte(v>>16), 1, 2, 3)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := c.recoverTornFrame(frame)
	runtime.ReadMemStats(&after)
	assert.Equal(t, "hello world", string(rec))
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "recovery must not allocate the declared window")
}

// TestZstdRecoveryHeaderWindow checks the window descriptor of the rewritten recovery header.
func TestZstdRecoveryHeaderWindow(t *testing.T) {
	for _, w := range []uint64{0, 1, 1000, 1024, 1025, 300 << 10, 1 << 20, zstdMaxFrameContent} {
		for _, withSize := range []bool{false, true} {
			in := zstdFrameHeader{hasContentSize: withSize, contentSize: 12345}
			hdr := zstdRecoveryHeader(in, w)
			h, complete, err := parseZstdFrameHeader(hdr, 0)
			require.NoError(t, err)
			require.True(t, complete)
			assert.Equal(t, int64(len(hdr)), h.size)
			assert.False(t, h.checksum())
			assert.Zero(t, h.descriptor&zstdFHDSingleSegment)
			assert.Equal(t, withSize, h.hasContentSize)
			if withSize {
				assert.Equal(t, uint64(12345), h.contentSize)
			}
			assert.GreaterOrEqual(t, h.windowSize, max(w, 1024), "window %d", w)
			assert.Less(t, h.windowSize, 2*max(w, 1024), "window %d", w)
		}
	}
}

// TestZstdScanErrors checks each structural error text and its absolute offset.
func TestZstdScanErrors(t *testing.T) {
	c := newTestZstdCodec(t)
	l := standardZstdTestLog(t, c)
	f2 := l.spans[1].start

	check := func(t *testing.T, data []byte, want string, wantFrames []frameSpan) {
		t.Helper()
		frames, torn, err := scanZstdFrames(data)
		require.Error(t, err)
		var fe *zstdFormatError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, want, err.Error())
		assert.Equal(t, int64(-1), torn)
		assert.Equal(t, wantFrames, frames)
	}

	t.Run("magic", func(t *testing.T) {
		for i := range int64(4) {
			data := append([]byte(nil), l.data...)
			data[f2+i] ^= 0x40
			check(t, data, "corrupt Zstandard session log: invalid frame magic at byte "+strconv.FormatInt(f2, 10), l.spans[:1])
		}
	})
	t.Run("skippable frame", func(t *testing.T) {
		skippable := []byte{0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4}
		data := append(append(append([]byte(nil), l.data[:f2]...), skippable...), l.data[f2:]...)
		check(t, data, fmt.Sprintf("corrupt Zstandard session log: invalid frame magic at byte %d", f2), l.spans[:1])
	})
	t.Run("garbage after last frame", func(t *testing.T) {
		data := append(append([]byte(nil), l.data...), "\n\n\n\n\n"...)
		check(t, data, fmt.Sprintf("corrupt Zstandard session log: invalid frame magic at byte %d", len(l.data)), l.spans)
	})
	t.Run("reserved frame-header bit", func(t *testing.T) {
		for _, bit := range []byte{0x08, 0x10} {
			data := append([]byte(nil), l.data...)
			data[f2+4] |= bit
			check(t, data, fmt.Sprintf("corrupt Zstandard session log: reserved frame-header bit at byte %d", f2+4), l.spans[:1])
		}
		// Detected even when the rest of the frame is missing.
		data := append([]byte(nil), l.data[:f2+5]...)
		data[f2+4] |= 0x08
		check(t, data, fmt.Sprintf("corrupt Zstandard session log: reserved frame-header bit at byte %d", f2+4), l.spans[:1])
	})
	t.Run("reserved block type", func(t *testing.T) {
		// Single-segment frame, no checksum, content size 5; then a block header of type 3.
		crafted := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x05}
		v := uint32(1) | 3<<1 | 5<<3
		crafted = append(crafted, byte(v), byte(v>>8), byte(v>>16), 'h', 'e', 'l', 'l', 'o')
		data := append(append([]byte(nil), l.data[:f2]...), crafted...)
		check(t, data, fmt.Sprintf("corrupt Zstandard session log: reserved block type at byte %d", f2+6), l.spans[:1])

		// In a later block of a real frame: rewrite the third block header of the large frame.
		s := l.spans[2]
		_, blocks := zstdTestBlocks(t, l.data[s.start:s.end])
		data = append([]byte(nil), l.data...)
		off := s.start + blocks[2].start
		data[off] |= 3 << 1
		check(t, data, fmt.Sprintf("corrupt Zstandard session log: reserved block type at byte %d", off), l.spans[:2])
	})
}

// TestZstdFrameHeaderLayouts checks header-length arithmetic for every descriptor layout with hand-built
// frames: dictionary-id sizes, content-size sizes, with and without single segment and checksum.
func TestZstdFrameHeaderLayouts(t *testing.T) {
	for _, single := range []bool{false, true} {
		for dictCode := range 4 {
			for fcsCode := range 4 {
				for _, checksum := range []bool{false, true} {
					fhd := byte(dictCode) | byte(fcsCode)<<6
					if single {
						fhd |= zstdFHDSingleSegment
					}
					if checksum {
						fhd |= zstdFHDChecksum
					}
					frame := []byte{0x28, 0xB5, 0x2F, 0xFD, fhd}
					if !single {
						frame = append(frame, 0x00)
					}
					frame = append(frame, make([]byte, []int{0, 1, 2, 4}[dictCode])...)
					fcsSize := 1 << fcsCode
					if fcsCode == 0 && !single {
						fcsSize = 0
					}
					frame = append(frame, make([]byte, fcsSize)...)
					hdrLen := len(frame)
					// A raw block of 2 bytes, an RLE block of 1000, a last empty compressed-type block.
					frame = append(frame, 2<<3, 0, 0, 'a', 'b')
					v := uint32(1)<<1 | 1000<<3
					frame = append(frame, byte(v), byte(v>>8), byte(v>>16), 'z')
					v = uint32(1) | 2<<1 | 1<<3
					frame = append(frame, byte(v), byte(v>>8), byte(v>>16), 0)
					if checksum {
						frame = append(frame, 1, 2, 3, 4)
					}
					name := fmt.Sprintf("fhd=%#02x", fhd)
					h, complete, err := parseZstdFrameHeader(frame, 0)
					require.NoError(t, err, name)
					require.True(t, complete, name)
					require.Equal(t, int64(hdrLen), h.size, name)

					data := append(append([]byte(nil), frame...), frame...)
					spans, torn, err := scanZstdFrames(data)
					require.NoError(t, err, name)
					require.Equal(t, int64(-1), torn, name)
					n := int64(len(frame))
					require.Equal(t, []frameSpan{{0, n}, {n, 2 * n}}, spans, name)
					for cut := n + 1; cut < 2*n; cut++ {
						spans, torn, err := scanZstdFrames(data[:cut])
						require.NoError(t, err, name)
						require.Equal(t, n, torn, "%s cut %d", name, cut)
						require.Equal(t, []frameSpan{{0, n}}, spans, name)
					}
				}
			}
		}
	}
}

// TestZstdDecodeFrameRefusals checks that decodeFrame refuses corrupt payloads, several frames, torn
// frames, frames without a checksum, and frames declaring an oversized content.
func TestZstdDecodeFrameRefusals(t *testing.T) {
	c := newTestZstdCodec(t)
	plain := variedJSONL(4, 5000)
	frame := c.encodeFrame(nil, plain)
	other := c.encodeFrame(nil, []byte("second\n"))

	t.Run("corrupt payload byte", func(t *testing.T) {
		bad := append([]byte(nil), frame...)
		bad[len(bad)/2] ^= 0x10
		_, err := c.decodeFrame(bad)
		require.Error(t, err)
	})
	t.Run("corrupt checksum", func(t *testing.T) {
		bad := append([]byte(nil), frame...)
		bad[len(bad)-2] ^= 0x01
		_, err := c.decodeFrame(bad)
		require.ErrorIs(t, err, zstd.ErrCRCMismatch)
	})
	t.Run("any single corrupted byte never yields wrong plaintext", func(t *testing.T) {
		for i := range frame {
			for _, x := range []byte{0x01, 0x80, 0xFF} {
				bad := append([]byte(nil), frame...)
				bad[i] ^= x
				got, err := c.decodeFrame(bad)
				if err == nil {
					require.True(t, bytes.Equal(plain, got), "byte %d ^ %#x decoded to different plaintext", i, x)
				}
			}
		}
	})
	t.Run("two frames", func(t *testing.T) {
		_, err := c.decodeFrame(append(append([]byte(nil), frame...), other...))
		require.EqualError(t, err, "input holds 2 complete Zstandard frames, expected exactly one")
	})
	t.Run("frame plus torn frame", func(t *testing.T) {
		_, err := c.decodeFrame(append(append([]byte(nil), frame...), other[:5]...))
		require.EqualError(t, err, "truncated Zstandard frame")
	})
	t.Run("torn", func(t *testing.T) {
		_, err := c.decodeFrame(frame[:len(frame)-1])
		require.EqualError(t, err, "truncated Zstandard frame")
	})
	t.Run("empty", func(t *testing.T) {
		_, err := c.decodeFrame(nil)
		require.EqualError(t, err, "input holds 0 complete Zstandard frames, expected exactly one")
	})
	t.Run("structural error passes through", func(t *testing.T) {
		bad := append([]byte(nil), frame...)
		bad[4] |= 0x08
		_, err := c.decodeFrame(bad)
		var fe *zstdFormatError
		require.ErrorAs(t, err, &fe)
		require.EqualError(t, err, "corrupt Zstandard session log: reserved frame-header bit at byte 4")
	})
	t.Run("no checksum", func(t *testing.T) {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(false))
		require.NoError(t, err)
		noCRC := enc.EncodeAll(plain, nil)
		require.NoError(t, enc.Close())
		_, err = c.decodeFrame(noCRC)
		require.EqualError(t, err, "no content checksum in Zstandard frame")
	})
	t.Run("declared content size over the cap", func(t *testing.T) {
		// Descriptor: 8-byte content size, single segment, checksum; content size 2 GiB; an RLE block.
		bomb := []byte{0x28, 0xB5, 0x2F, 0xFD, 3<<6 | zstdFHDSingleSegment | zstdFHDChecksum}
		bomb = binary.LittleEndian.AppendUint64(bomb, 2<<30)
		v := uint32(1) | 1<<1 | (128<<10)<<3
		bomb = append(bomb, byte(v), byte(v>>8), byte(v>>16), 'x', 0, 0, 0, 0)
		_, err := c.decodeFrame(bomb)
		require.EqualError(t, err, "declared content size 2147483648 of Zstandard frame exceeds the limit of 1073741824 bytes")
		assert.Empty(t, c.recoverTornFrame(bomb[:len(bomb)-2]), "recovery refuses the oversized window too")
	})
	t.Run("content size mismatch", func(t *testing.T) {
		bad := append([]byte(nil), frame...)
		h, _, err := parseZstdFrameHeader(bad, 0)
		require.NoError(t, err)
		bad[h.size-1]++ // last content-size byte
		_, err = c.decodeFrame(bad)
		require.Error(t, err)
	})
}

// TestZstdCodecConcurrentUse runs encodes, decodes and recoveries in parallel (meaningful under -race).
func TestZstdCodecConcurrentUse(t *testing.T) {
	c := newTestZstdCodec(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				plain := variedJSONL(uint64(g*100+i), 3000+g*1000)
				frame := c.encodeFrame(nil, plain)
				got, err := c.decodeFrame(frame)
				if err != nil || !bytes.Equal(plain, got) {
					errs <- fmt.Errorf("goroutine %d round %d: %v", g, i, err)
					return
				}
				if rec := c.recoverTornFrame(frame[:len(frame)-2]); !bytes.Equal(plain, rec) {
					errs <- fmt.Errorf("goroutine %d round %d: recovered %d of %d bytes", g, i, len(rec), len(plain))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestZstdFrameCLIInterop checks frames against the reference zstd command-line tool
// (Debian package zstd; .ci/run installs it).
func TestZstdFrameCLIInterop(t *testing.T) {
	bin, err := exec.LookPath("zstd")
	require.NoError(t, err, "the zstd command-line tool is required (apt-get install zstd)")
	c := newTestZstdCodec(t)
	dir := t.TempDir()

	// Our frames (including the hand-built empty one) decode with the reference implementation.
	l := buildZstdTestLog(t, c, []byte("header\n"), nil, variedJSONL(5, 200<<10))
	ours := filepath.Join(dir, "ours.zst")
	require.NoError(t, os.WriteFile(ours, l.data, 0o600))
	out, err := exec.Command(bin, "-q", "-d", "-c", ours).Output()
	require.NoError(t, err)
	assert.True(t, bytes.Equal(bytes.Join(l.plains, nil), out))

	// Reference-compressed frames (with --check; from a file the header has a content size and is
	// single-segment, from stdin it has a window descriptor and no content size) scan, decode, and recover
	// exactly their complete blocks when torn.
	plain := variedJSONL(6, 300<<10)
	in := filepath.Join(dir, "plain.jsonl")
	require.NoError(t, os.WriteFile(in, plain, 0o600))
	fromFile, err := exec.Command(bin, "-q", "--check", "-c", in).Output()
	require.NoError(t, err)
	cmd := exec.Command(bin, "-q", "--check", "-c")
	cmd.Stdin = bytes.NewReader(plain)
	fromStdin, err := cmd.Output()
	require.NoError(t, err)

	for name, ref := range map[string][]byte{"file": fromFile, "stdin": fromStdin} {
		h, _, err := parseZstdFrameHeader(ref, 0)
		require.NoError(t, err, name)
		assert.Equal(t, name == "file", h.hasContentSize, name)
		spans, torn, err := scanZstdFrames(ref)
		require.NoError(t, err, name)
		require.Equal(t, int64(-1), torn, name)
		require.Equal(t, []frameSpan{{0, int64(len(ref))}}, spans, name)
		got, err := c.decodeFrame(ref)
		require.NoError(t, err, name)
		assert.True(t, bytes.Equal(plain, got), name)

		_, blocks := zstdTestBlocks(t, ref)
		require.Greater(t, len(blocks), 1, name)
		cuts := map[int64]bool{}
		for cut := int64(0); cut < int64(len(ref)); cut += 499 {
			cuts[cut] = true
		}
		for _, b := range append(blocks, zstdBlockInfo{end: int64(len(ref))}) {
			for d := int64(-6); d <= 6; d++ {
				if cut := b.end + d; cut >= 0 && cut < int64(len(ref)) {
					cuts[cut] = true
				}
			}
		}
		for _, cut := range slices.Sorted(maps.Keys(cuts)) {
			rec := c.recoverTornFrame(ref[:cut])
			require.True(t, bytes.HasPrefix(plain, rec), "%s cut %d", name, cut)
			require.Equal(t, wantRecoveredLen(t, ref, len(plain), cut), len(rec), "%s cut %d", name, cut)
		}
	}
}

// FuzzScanZstdFrames checks that scanZstdFrames never panics, that its spans are contiguous from 0 and
// within bounds, that tornStart is consistent with them, and that errors are typed. It also feeds the
// input to decodeFrame and recoverTornFrame, which must not panic.
func FuzzScanZstdFrames(f *testing.F) {
	c := newTestZstdCodec(f)
	l := standardZstdTestLog(f, c)
	small := buildZstdTestLog(f, c, []byte("{\"h\":1}\n"), []byte("a\nb\n"), nil)
	f.Add([]byte{})
	f.Add(small.data)
	f.Add(small.data[:len(small.data)-3])
	f.Add(l.data[:l.spans[1].end+20])
	f.Add([]byte{0x28, 0xB5, 0x2F})
	f.Add([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x08})
	f.Add([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x05, 0x0F, 0x00, 0x00})
	f.Add([]byte{0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0})
	f.Add([]byte("{\"type\":\"header\"}\n"))

	f.Fuzz(func(t *testing.T, b []byte) {
		frames, torn, err := scanZstdFrames(b)
		pos := int64(0)
		for _, s := range frames {
			require.Equal(t, pos, s.start, "spans must be contiguous from 0")
			require.Greater(t, s.end, s.start)
			require.LessOrEqual(t, s.end, int64(len(b)))
			pos = s.end
		}
		if err != nil {
			var fe *zstdFormatError
			require.ErrorAs(t, err, &fe)
			require.Contains(t, err.Error(), "corrupt Zstandard session log: ")
			require.Equal(t, int64(-1), torn)
			require.Less(t, pos, int64(len(b)))
		} else if torn < 0 {
			require.Equal(t, int64(len(b)), pos, "no torn frame: the spans cover the input")
		} else {
			require.Equal(t, pos, torn, "the torn frame starts where the complete ones end")
			require.Less(t, torn, int64(len(b)))
			_ = c.recoverTornFrame(b[torn:])
		}
		// The complete prefix rescans identically.
		again, torn2, err2 := scanZstdFrames(b[:pos])
		require.NoError(t, err2)
		require.Equal(t, int64(-1), torn2)
		require.Equal(t, frames, again)
		for _, s := range frames {
			_, _ = c.decodeFrame(b[s.start:s.end])
		}
	})
}

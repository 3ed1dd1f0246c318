package jsonl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strconv"

	"github.com/klauspost/compress/zstd"
)

// This file is the Zstandard framing layer of the zstd-mode session log (FORMAT.md §4.2, §4.4): a structural frame
// scanner that finds frame boundaries without decompressing, and a codec that writes one checksummed frame
// per header/batch, decodes one complete frame, and salvages the plaintext of a torn final frame.

// zstdFrameMagic is the little-endian magic number that opens every Zstandard frame.
const zstdFrameMagic uint32 = 0xFD2FB528

// zstdMaxFrameContent caps the decompressed size of one frame (1 GiB). decodeFrame refuses frames that
// declare a larger content size or that decode to more; recoverTornFrame stops salvaging at this size.
// encodeFrame does not enforce it, so callers must not write batches larger than this.
const zstdMaxFrameContent = 1 << 30

// Frame-header descriptor bits (RFC 8878 §3.1.1.1.1).
const (
	zstdFHDDictIDMask       = 0x03 // dictionary-id field size code: 0/1/2/4 bytes
	zstdFHDChecksum         = 0x04 // a 4-byte content checksum follows the last block
	zstdFHDReserved         = 0x18 // must be zero (bit 3 reserved, bit 4 unused)
	zstdFHDSingleSegment    = 0x20 // no window descriptor; content size always present
	zstdFHDContentSizeShift = 6    // top two bits: frame-content-size field size code
)

// Block types (RFC 8878 §3.1.1.2.2).
const (
	zstdBlockRaw      = 0 // payload is the plaintext itself
	zstdBlockRLE      = 1 // payload is one byte, repeated size times
	zstdBlockReserved = 3 // invalid (type 2, compressed, needs no special handling here)
)

// zstdBlockHeaderSize is the size of a block header; zstdChecksumSize that of the content checksum.
const (
	zstdBlockHeaderSize = 3
	zstdChecksumSize    = 4
)

// zstdMaxBlockOutput is the most plaintext one block can decode to (128 KiB).
const zstdMaxBlockOutput = 128 << 10

// zstdEmptyFrame is the frame encodeFrame emits for empty plaintext: klauspost writes empty input as a
// frame without a content checksum, so this one is built by hand. Magic; descriptor 0x24 (single segment,
// checksum, 1-byte content size); content size 0; one last raw block of size 0; the low 32 bits of
// XXH64("") = 0xEF46DB3751D8E999, little-endian. It is byte-identical to what
// `zstd --check` writes for an empty file.
var zstdEmptyFrame = []byte{
	0x28, 0xB5, 0x2F, 0xFD,
	0x24,
	0x00,
	0x01, 0x00, 0x00,
	0x99, 0xE9, 0xD8, 0x51,
}

// frameSpan is the byte range [start, end) of one complete Zstandard frame in a log file.
type frameSpan struct{ start, end int64 }

// zstdFormatError is a structural defect found by scanZstdFrames; its message is the exact text of FORMAT.md §4.2.
type zstdFormatError struct{ msg string }

// Error returns the exact error text.
func (e *zstdFormatError) Error() string { return e.msg }

// newZstdFormatError builds the error "corrupt Zstandard session log: <what> at byte <offset>".
func newZstdFormatError(what string, offset int64) *zstdFormatError {
	return &zstdFormatError{msg: "corrupt Zstandard session log: " + what + " at byte " + strconv.FormatInt(offset, 10)}
}

// zstdFrameHeader is the parsed header of one frame, as far as the framing layer needs it.
type zstdFrameHeader struct {
	descriptor     byte   // the frame-header descriptor byte
	size           int64  // header length in bytes, including the magic number
	windowSize     uint64 // from the window descriptor, or the content size for a single-segment frame
	dictID         uint32 // dictionary id; 0 when absent
	contentSize    uint64 // declared decompressed size; valid only if hasContentSize
	hasContentSize bool   // whether the header carries a frame-content-size field
}

// checksum reports whether the frame carries a content checksum.
func (h zstdFrameHeader) checksum() bool { return h.descriptor&zstdFHDChecksum != 0 }

// parseZstdFrameHeader parses the frame header starting at b[start:]. It reports complete=false (and no
// error) when b ends inside the header. Each field is validated as soon as all of its bytes are present;
// errors carry absolute offsets into b: the frame start for a bad magic number, the descriptor byte
// (start+4) for a reserved descriptor bit.
func parseZstdFrameHeader(b []byte, start int64) (h zstdFrameHeader, complete bool, err error) {
	avail := int64(len(b)) - start
	if avail < 4 {
		return h, false, nil
	}
	if binary.LittleEndian.Uint32(b[start:]) != zstdFrameMagic {
		return h, false, newZstdFormatError("invalid frame magic", start)
	}
	if avail < 5 {
		return h, false, nil
	}
	fhd := b[start+4]
	if fhd&zstdFHDReserved != 0 {
		return h, false, newZstdFormatError("reserved frame-header bit", start+4)
	}
	h.descriptor = fhd
	single := fhd&zstdFHDSingleSegment != 0

	wdSize := int64(1)
	if single {
		wdSize = 0
	}
	dictSize := [4]int64{0, 1, 2, 4}[fhd&zstdFHDDictIDMask]
	var fcsSize int64
	switch fcsCode := fhd >> zstdFHDContentSizeShift; {
	case fcsCode != 0:
		fcsSize = 1 << fcsCode
	case single:
		fcsSize = 1
	}
	h.size = 5 + wdSize + dictSize + fcsSize
	if avail < h.size {
		return h, false, nil
	}
	pos := start + 5
	if wdSize > 0 {
		wd := b[pos]
		base := uint64(1) << (10 + wd>>3)
		h.windowSize = base + base/8*uint64(wd&7)
	}
	pos += wdSize
	var id [4]byte
	copy(id[:], b[pos:pos+dictSize])
	h.dictID = binary.LittleEndian.Uint32(id[:])
	pos += dictSize
	if fcsSize > 0 {
		f := b[pos : pos+fcsSize]
		h.hasContentSize = true
		switch fcsSize {
		case 1:
			h.contentSize = uint64(f[0])
		case 2:
			h.contentSize = uint64(binary.LittleEndian.Uint16(f)) + 256
		case 4:
			h.contentSize = uint64(binary.LittleEndian.Uint32(f))
		case 8:
			h.contentSize = binary.LittleEndian.Uint64(f)
		}
	}
	if single {
		h.windowSize = h.contentSize
	}
	return h, true, nil
}

// zstdBlocksEnd walks the blocks of a frame whose first block header is at b[pos:]. It returns the offset
// just past the last complete block, whether the last-block flag was reached (lastSeen), and, when b ends
// inside a block, that block's header offset and type (tornBlock = -1 otherwise). A block header of the
// reserved type is an error at its absolute offset.
func zstdBlocksEnd(b []byte, pos int64) (end int64, lastSeen bool, tornBlock int64, tornType int, err error) {
	n := int64(len(b))
	for {
		if n-pos < zstdBlockHeaderSize {
			return pos, false, pos, -1, nil
		}
		bh := uint32(b[pos]) | uint32(b[pos+1])<<8 | uint32(b[pos+2])<<16
		last := bh&1 != 0
		typ := int(bh>>1) & 3
		payload := int64(bh >> 3)
		switch typ {
		case zstdBlockReserved:
			return pos, false, -1, -1, newZstdFormatError("reserved block type", pos)
		case zstdBlockRLE:
			payload = 1
		}
		if n-pos-zstdBlockHeaderSize < payload {
			return pos, false, pos, typ, nil
		}
		pos += zstdBlockHeaderSize + payload
		if last {
			return pos, true, -1, -1, nil
		}
	}
}

// scanZstdFrames walks a concatenation of Zstandard frames structurally (FORMAT.md §4.2) without decompressing:
// magic 0xFD2FB528 (little-endian; skippable frames are refused as an invalid magic), frame-header
// descriptor (reserved bits 0x18 must be clear; single-segment flag, dictionary-id size 0/1/2/4,
// frame-content-size size: code 0 -> 1 byte if single-segment else 0, otherwise 1<<code; the window
// descriptor byte is present iff not single-segment), then 3-byte little-endian block headers (bit 0 last,
// bits 1-2 type, rest size; RLE blocks carry 1 payload byte, raw and compressed blocks carry size bytes,
// type 3 is an error), then the 4-byte content checksum if flagged.
//
// Running out of bytes anywhere inside a frame (including inside its 4-byte magic) marks that frame torn:
// tornStart is its start offset and the scan ends. tornStart is -1 when b ends exactly on a frame boundary
// (including an empty b). Structural errors are *zstdFormatError values whose texts carry absolute byte
// offsets into b: the frame start for "invalid frame magic", the descriptor byte for "reserved frame-header
// bit", the block header for "reserved block type". On error, frames holds the complete frames before the
// defective one and tornStart is -1.
func scanZstdFrames(b []byte) (frames []frameSpan, tornStart int64, err error) {
	n := int64(len(b))
	for pos := int64(0); pos < n; {
		h, complete, err := parseZstdFrameHeader(b, pos)
		if err != nil {
			return frames, -1, err
		}
		if !complete {
			return frames, pos, nil
		}
		end, lastSeen, _, _, err := zstdBlocksEnd(b, pos+h.size)
		if err != nil {
			return frames, -1, err
		}
		if !lastSeen {
			return frames, pos, nil
		}
		if h.checksum() {
			end += zstdChecksumSize
			if end > n {
				return frames, pos, nil
			}
		}
		frames = append(frames, frameSpan{start: pos, end: end})
		pos = end
	}
	return frames, -1, nil
}

// zstdCodec holds one reusable encoder and one reusable decoder. It is safe for concurrent use: it only
// calls Encoder.EncodeAll and Decoder.DecodeAll, which klauspost documents as safe for concurrent use, and
// recoverTornFrame builds a private streaming decoder per call. Neither shared object starts goroutines
// (they are never given a stream), so the codec needs no Close.
type zstdCodec struct {
	// enc options: zstd.SpeedDefault (the default level; FORMAT.md §4.2 has no level setting); WithEncoderCRC(true)
	// (content checksum in every frame); WithSingleSegment(true) so the frame-content-size field is always
	// written (klauspost omits it for non-single-segment frames under 256 bytes); WithZeroFrames(true).
	// Empty plaintext is special-cased by encodeFrame (see zstdEmptyFrame).
	enc *zstd.Encoder
	// dec options: WithDecoderMaxMemory(zstdMaxFrameContent) caps the decoded size of one DecodeAll call
	// (also while decoding frames without a declared size); WithDecoderMaxWindow(zstdMaxFrameContent)
	// raises klauspost's default 512 MiB window limit to the same cap, since a single-segment frame's
	// window is its content size; WithDecodeAllCapLimit is left off; checksums are verified (IgnoreChecksum
	// is never set); default concurrency (up to min(4, GOMAXPROCS) simultaneous DecodeAll calls, more
	// wait); no dictionaries.
	dec *zstd.Decoder
}

// newZstdCodec builds the codec's encoder and decoder with the options documented on zstdCodec.
func newZstdCodec() (*zstdCodec, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderCRC(true),
		zstd.WithSingleSegment(true),
		zstd.WithZeroFrames(true),
	)
	if err != nil {
		return nil, fmt.Errorf("create Zstandard encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(zstdMaxFrameContent),
		zstd.WithDecoderMaxWindow(zstdMaxFrameContent),
	)
	if err != nil {
		_ = enc.Close()
		return nil, fmt.Errorf("create Zstandard decoder: %w", err)
	}
	return &zstdCodec{enc: enc, dec: dec}, nil
}

// encodeFrame compresses plain into exactly one Zstandard frame with a content checksum and a
// frame-content-size field, appended to dst. Plaintext larger than zstdMaxFrameContent is encoded but
// would be refused by decodeFrame; callers must not write such batches.
func (c *zstdCodec) encodeFrame(dst, plain []byte) []byte {
	if len(plain) == 0 {
		return append(dst, zstdEmptyFrame...)
	}
	return c.enc.EncodeAll(plain, dst)
}

// decodeFrame decompresses exactly one complete frame and verifies its content checksum. It refuses (with an
// error; the caller classifies any error as corruption) empty or torn input, input holding more than one
// frame, structural defects, frames without a content checksum, frames declaring more than
// zstdMaxFrameContent bytes of content, and every decode, size or checksum failure of the decoder.
func (c *zstdCodec) decodeFrame(frame []byte) ([]byte, error) {
	return c.appendDecodedFrame(nil, frame)
}

// appendDecodedFrame is decodeFrame appending the plaintext to dst.
func (c *zstdCodec) appendDecodedFrame(dst, frame []byte) ([]byte, error) {
	spans, torn, err := scanZstdFrames(frame)
	if err != nil {
		return nil, err
	}
	if torn >= 0 {
		return nil, errors.New("truncated Zstandard frame")
	}
	if len(spans) != 1 {
		return nil, fmt.Errorf("input holds %d complete Zstandard frames, expected exactly one", len(spans))
	}
	h, _, _ := parseZstdFrameHeader(frame, 0) // cannot fail: the scan accepted this header
	if !h.checksum() {
		return nil, errors.New("no content checksum in Zstandard frame")
	}
	if h.hasContentSize && h.contentSize > zstdMaxFrameContent {
		return nil, fmt.Errorf("declared content size %d of Zstandard frame exceeds the limit of %d bytes", h.contentSize, zstdMaxFrameContent)
	}
	plain, err := c.dec.DecodeAll(frame, dst)
	if err != nil {
		return nil, fmt.Errorf("decode Zstandard frame: %w", err)
	}
	return plain, nil
}

// zstdBlocksOutputBound returns an upper bound on the plaintext that a run of complete, well-typed blocks
// can decode to: the regenerated size of raw and RLE blocks, and the 128 KiB block maximum of compressed ones.
func zstdBlocksOutputBound(blocks []byte) uint64 {
	var bound uint64
	for pos := 0; pos+zstdBlockHeaderSize <= len(blocks); {
		bh := uint32(blocks[pos]) | uint32(blocks[pos+1])<<8 | uint32(blocks[pos+2])<<16
		size := int(bh >> 3)
		switch int(bh>>1) & 3 {
		case zstdBlockRaw:
			bound += uint64(size)
		case zstdBlockRLE:
			bound += uint64(size)
			size = 1
		default:
			bound += zstdMaxBlockOutput
		}
		pos += zstdBlockHeaderSize + size
	}
	return bound
}

// zstdRecoveryHeader builds the header of the private frame that recoverTornFrame decodes: not
// single-segment, no dictionary, no content checksum, the given window size (rounded up to a power of two,
// at least 1 KiB), and the original frame's content size (4-byte field) if it declared one.
func zstdRecoveryHeader(h zstdFrameHeader, window uint64) []byte {
	windowLog := 10
	if window > 1<<windowLog {
		windowLog = bits.Len64(window - 1)
	}
	out := binary.LittleEndian.AppendUint32(nil, zstdFrameMagic)
	if !h.hasContentSize {
		return append(out, 0, byte(windowLog-10)<<3)
	}
	out = append(out, 2<<zstdFHDContentSizeShift, byte(windowLog-10)<<3)
	return binary.LittleEndian.AppendUint32(out, uint32(h.contentSize))
}

// eofTrackingReader is a bytes.Reader that records whether a Read was attempted after all bytes were
// consumed. It deliberately has no Bytes method, so klauspost's decoder streams from it block by block
// instead of decoding it whole (the decoder's *bytes.Buffer shortcut).
type eofTrackingReader struct {
	r       *bytes.Reader
	reached bool
}

// Read reads from the underlying reader and notes an attempt to read past its end.
func (e *eofTrackingReader) Read(p []byte) (int, error) {
	if e.r.Len() == 0 && len(p) > 0 {
		e.reached = true
	}
	return e.r.Read(p)
}

// recoverTornFrame decompresses as much plaintext as possible from an incomplete final frame (the bytes
// from tornStart to EOF) without requiring frame completion or the checksum, mirroring libzstd's streaming
// decoder on truncated input: the output of every complete block, including the last block when only the
// checksum is missing, plus the available payload of a torn raw block. Only the first frame in partial is
// considered. The result is a prefix of the frame's plaintext as far as the complete blocks decode
// correctly; it is at most zstdMaxFrameContent bytes.
//
// How: klauspost's streaming decoder with concurrency 1 hands out each block's output as soon as that
// block is decoded, but withholds the last block until the checksum after it has been read and verified,
// and it allocates its whole window up front (for a single-segment frame, the declared content size). So
// the decoder is given a private frame: a rewritten header (no checksum, the original content size, a
// window no larger than the complete blocks can fill) followed by the complete blocks only. The decoder
// then stops with an unexpected EOF after the last complete block, or ends normally if the last block is
// complete.
//
// It never returns an error: a frame header that is incomplete, structurally invalid, names a dictionary
// or declares more than zstdMaxFrameContent bytes yields nil, and a decoding failure in a complete block
// yields the plaintext of the blocks before it.
func (c *zstdCodec) recoverTornFrame(partial []byte) []byte {
	h, complete, err := parseZstdFrameHeader(partial, 0)
	if err != nil || !complete || h.dictID != 0 || (h.hasContentSize && h.contentSize > zstdMaxFrameContent) {
		return nil
	}
	end, lastSeen, tornBlock, tornType, err := zstdBlocksEnd(partial, h.size)
	if err != nil {
		// A reserved block type is not a tear; salvage the blocks before it only.
		tornBlock = -1
	}
	blocks := partial[h.size:end]
	window := min(h.windowSize, zstdBlocksOutputBound(blocks), zstdMaxFrameContent)
	synthetic := append(zstdRecoveryHeader(h, window), blocks...)

	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1), // synchronous: output is released block by block
		zstd.WithDecoderMaxMemory(zstdMaxFrameContent),
		zstd.WithDecoderMaxWindow(zstdMaxFrameContent),
		zstd.WithDecodeBuffersBelow(0), // never decode the input whole
	)
	if err != nil {
		return nil
	}
	defer dec.Close()
	src := &eofTrackingReader{r: bytes.NewReader(synthetic)}
	if err := dec.Reset(src); err != nil {
		return nil
	}

	var out []byte
	buf := make([]byte, 32<<10)
	for {
		if len(out) >= zstdMaxFrameContent {
			return out
		}
		n, rerr := dec.Read(buf[:min(len(buf), zstdMaxFrameContent-len(out))])
		out = append(out, buf[:n]...)
		if rerr == nil {
			continue
		}
		if rerr == io.EOF || lastSeen || tornBlock < 0 || !src.reached || !errors.Is(rerr, io.ErrUnexpectedEOF) {
			// Finished, or stopped before the end of the complete blocks: nothing more to add.
			return out
		}
		break
	}
	// Every complete block decoded and the decoder stopped at the cut. A torn raw block's available
	// payload is literal plaintext (libzstd streams it too).
	if tornType == zstdBlockRaw {
		raw := partial[tornBlock+zstdBlockHeaderSize:]
		if h.hasContentSize && uint64(len(out))+uint64(len(raw)) > h.contentSize {
			return out // inconsistent with the declared size: corrupt, not torn
		}
		raw = raw[:min(len(raw), zstdMaxFrameContent-len(out))]
		out = append(out, raw...)
	}
	return out
}

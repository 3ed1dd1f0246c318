package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// errInterrupted is what a chat read returns for Ctrl-C: the 0x03 byte of a
// terminal in raw mode, or SIGINT.
var errInterrupted = errors.New("interrupted")

// chatInput reads the chat's input. One goroutine reads stdin for the whole
// chat and hands its bytes over a channel, so that a line can be read while
// the agent's turn streams (the terminal then in its normal, cooked mode: the
// terminal echoes and edits the line, and Ctrl-C is SIGINT) as well as at the
// prompt (a terminal then in raw mode, edited by golang.org/x/term).
type chatInput struct {
	in       io.Reader
	fd       int
	terminal bool
	out      io.Writer

	chunks chan []byte
	errc   chan error
	// interrupts receives SIGINT (and, from the prompt's reader, Ctrl-C).
	interrupts chan struct{}
	start      sync.Once

	// pending holds bytes received and not consumed yet.
	pending []byte
	// editor edits the prompt line on a terminal.
	editor *term.Terminal
	// sawCtrlC reports that the editor was given a Ctrl-C byte.
	sawCtrlC bool
}

// newChatInput reads in; a terminal (in and out both) gets line editing.
func newChatInput(in io.Reader, out io.Writer) *chatInput {
	ci := &chatInput{in: in, out: out, chunks: make(chan []byte, 16), errc: make(chan error, 1), interrupts: make(chan struct{}, 4)}
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) && isTerminal(out) {
		ci.terminal, ci.fd = true, int(f.Fd())
		ci.editor = term.NewTerminal(struct {
			io.Reader
			io.Writer
		}{editorReader{ci}, out}, "> ")
		if w, h, err := term.GetSize(ci.fd); err == nil {
			_ = ci.editor.SetSize(w, h)
		}
	}
	return ci
}

// interrupt delivers a Ctrl-C (SIGINT) to whoever reads next.
func (ci *chatInput) interrupt() {
	select {
	case ci.interrupts <- struct{}{}:
	default:
	}
}

// pump starts the stdin reader once.
func (ci *chatInput) pump() {
	ci.start.Do(func() {
		go func() {
			for {
				buf := make([]byte, 1024)
				n, err := ci.in.Read(buf)
				if n > 0 {
					ci.chunks <- buf[:n]
				}
				if err != nil {
					ci.errc <- err
					return
				}
			}
		}()
	})
}

// next returns the next bytes of stdin, an interrupt or the end of ctx.
func (ci *chatInput) next(ctx context.Context) ([]byte, error) {
	ci.pump()
	select {
	case b := <-ci.chunks:
		return b, nil
	default:
	}
	select {
	case b := <-ci.chunks:
		return b, nil
	case err := <-ci.errc:
		ci.errc <- err // stays the answer
		return nil, err
	case <-ci.interrupts:
		return nil, errInterrupted
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readLine reads a line at the prompt: edited in raw mode on a terminal,
// plain otherwise. It returns io.EOF at the end of the input (Ctrl-D on an
// empty line) and errInterrupted for Ctrl-C.
func (ci *chatInput) readLine(ctx context.Context) (string, error) {
	if !ci.terminal {
		return ci.plainLine(ctx)
	}
	state, err := term.MakeRaw(ci.fd)
	if err != nil {
		return "", err
	}
	defer func() { _ = term.Restore(ci.fd, state) }()
	ci.sawCtrlC = false
	line, err := ci.editor.ReadLine()
	switch {
	case err == nil:
		return line, nil
	case errors.Is(err, io.EOF) && ci.sawCtrlC:
		_, _ = io.WriteString(ci.editor, "^C\n")
		return "", errInterrupted
	case errors.Is(err, io.EOF):
		_, _ = io.WriteString(ci.editor, "\n")
	}
	return "", err
}

// plainLine reads up to a newline from the input; a last line without one
// is a line too.
func (ci *chatInput) plainLine(ctx context.Context) (string, error) {
	for {
		if i := bytes.IndexByte(ci.pending, '\n'); i >= 0 {
			line := string(ci.pending[:i])
			ci.pending = ci.pending[i+1:]
			return strings.TrimSuffix(line, "\r"), nil
		}
		b, err := ci.next(ctx)
		if errors.Is(err, io.EOF) && len(ci.pending) > 0 {
			line := string(ci.pending)
			ci.pending = nil
			return line, nil
		}
		if err != nil {
			return "", err
		}
		ci.pending = append(ci.pending, b...)
	}
}

// editorReader feeds the prompt's editor from the stdin reader and notes a
// Ctrl-C, which the editor reports as io.EOF like a Ctrl-D.
type editorReader struct{ ci *chatInput }

// Read implements io.Reader.
func (r editorReader) Read(p []byte) (int, error) {
	if len(r.ci.pending) == 0 {
		b, err := r.ci.next(context.Background())
		if errors.Is(err, errInterrupted) {
			// SIGINT at the prompt (not from this terminal, which is raw).
			r.ci.sawCtrlC = true
			return copy(p, []byte{3}), nil
		}
		if err != nil {
			return 0, err
		}
		r.ci.pending = b
	}
	n := copy(p, r.ci.pending)
	if bytes.IndexByte(p[:n], 3) >= 0 {
		r.ci.sawCtrlC = true
	}
	r.ci.pending = r.ci.pending[n:]
	return n, nil
}

// drain moves the bytes received and not taken yet to pending.
func (ci *chatInput) drain() {
	for {
		select {
		case b := <-ci.chunks:
			ci.pending = append(ci.pending, b...)
		default:
			return
		}
	}
}

// takeLine returns the first complete line received so far, leaving the
// rest pending; ok is false when no line is complete.
func (ci *chatInput) takeLine() (line string, ok bool) {
	i := bytes.IndexByte(ci.pending, '\n')
	if i < 0 {
		return "", false
	}
	line = strings.TrimSuffix(string(ci.pending[:i]), "\r")
	ci.pending = ci.pending[i+1:]
	return line, true
}

// takeLines returns the complete lines received so far (during a turn).
func (ci *chatInput) takeLines(b []byte) []string {
	ci.pending = append(ci.pending, b...)
	var lines []string
	for {
		i := bytes.IndexByte(ci.pending, '\n')
		if i < 0 {
			return lines
		}
		lines = append(lines, strings.TrimSuffix(string(ci.pending[:i]), "\r"))
		ci.pending = ci.pending[i+1:]
	}
}

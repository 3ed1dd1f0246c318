package session

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sessionflow/sessionflow/wire"
)

func TestHeaderValidate(t *testing.T) {
	ok := wire.Header{Version: wire.FormatVersion, ID: "sess-1", CreatedAt: 1700000000000, Cwd: "/work", ParentSession: "p",
		IsSeeded: true, Origin: wire.OriginSubagent, DelegationDepth: 2, AgentPreset: "coder"}
	assert.NoError(t, ok.Validate())
	assert.NoError(t, wire.Header{ID: "x"}.Validate())
	for _, cwd := range []string{`C:\work`, `c:/work`, `\\server\share`} {
		h := ok
		h.Cwd = cwd
		assert.NoError(t, h.Validate(), cwd)
	}

	cases := []struct {
		mut  func(*wire.Header)
		want string
	}{
		{func(h *wire.Header) { h.ID = "" }, "cannot encode an empty path segment"},
		{func(h *wire.Header) { h.ID = "a\xffb" }, `session id must be valid UTF-8, got "a\xffb"`},
		{func(h *wire.Header) { h.CreatedAt = -1 }, "session metadata createdAt must be a non-negative safe integer"},
		{func(h *wire.Header) { h.CreatedAt = wire.MaxSafeInteger + 1 }, "session metadata createdAt must be a non-negative safe integer"},
		{func(h *wire.Header) { h.DelegationDepth = -1 }, "session header delegationDepth must be a non-negative safe integer"},
		{func(h *wire.Header) { h.Cwd = "relative/dir" }, `session header cwd must be an absolute path, got "relative/dir"`},
		{func(h *wire.Header) { h.Origin = "user" }, `session header origin must be "subagent", got "user"`},
		{func(h *wire.Header) { h.ParentSession = "\xff" }, "session header parentSession must be valid UTF-8"},
		{func(h *wire.Header) { h.AgentPreset = "\xff"; h.Cwd = "/\xff" }, "session header cwd must be valid UTF-8"},
	}
	for _, c := range cases {
		h := ok
		c.mut(&h)
		assert.EqualError(t, h.Validate(), c.want)
	}
	assert.True(t, errors.Is(wire.Header{ID: "a\xff"}.Validate(), wire.ErrInvalidUTF8ID))
	assert.ErrorIs(t, wire.Header{ID: "x", CreatedAt: -1}.Validate(), wire.ErrCreatedAt)
	assert.ErrorIs(t, wire.Header{}.Validate(), wire.ErrEmptyID)
}

func TestHeaderValidateInheritedCount(t *testing.T) {
	seeded := wire.Header{ID: "x", IsSeeded: true}
	unseeded := wire.Header{ID: "x"}
	assert.NoError(t, seeded.ValidateInheritedCount(0))
	assert.NoError(t, seeded.ValidateInheritedCount(12))
	assert.NoError(t, unseeded.ValidateInheritedCount(0))
	assert.NoError(t, unseeded.ValidateInheritedCount(-1))
	assert.EqualError(t, seeded.ValidateInheritedCount(-1), "seeded session header requires an inherited event count")
	assert.ErrorIs(t, seeded.ValidateInheritedCount(-1), wire.ErrSeededWithoutCount)
	assert.EqualError(t, unseeded.ValidateInheritedCount(3), "unseeded session header inherited event count must be 0")
	assert.ErrorIs(t, unseeded.ValidateInheritedCount(3), wire.ErrUnseededWithCount)
	assert.Error(t, seeded.ValidateInheritedCount(wire.MaxSafeInteger+1))
}

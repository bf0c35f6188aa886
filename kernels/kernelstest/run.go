package kernelstest

import (
	"testing"

	"flashstep/kernels"
)

// MustRun is c as a kernels.Run, failing the test when c is not valid.
func MustRun(t testing.TB, c kernels.Config) kernels.Run {
	t.Helper()
	r, err := c.Check()
	if err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	return r
}

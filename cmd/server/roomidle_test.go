package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestRoomIdleFlag: -room-idle sets how long a room lives while its
// presenter's page stays open but silent; less than a minute is refused,
// since a lesson's pauses are longer.
func TestRoomIdleFlag(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"10s", "-1h", "0"} {
		err := run(context.Background(), []string{"-worker", "none", "-addr", "127.0.0.1:0", "-room-idle", bad}, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), "-room-idle") {
			t.Errorf("-room-idle %s: %v", bad, err)
		}
	}
}

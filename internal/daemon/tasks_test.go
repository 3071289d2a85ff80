package daemon

import (
	"slices"
	"testing"
	"time"
)

func TestTasksWaitForWhatRuns(t *testing.T) {
	var ts tasks
	if left := ts.wait(time.Millisecond); left != nil {
		t.Fatalf("no task started: wait names %v", left)
	}
	release := make(chan struct{})
	started := make(chan struct{})
	ts.Go("stop", func() { <-release })
	ts.Go("stop", func() { <-release })
	ts.Go("monitor", func() {
		// A task that starts another as it ends: wait must see that one too.
		ts.Go("leftovers", func() { close(started); <-release })
	})
	<-started
	if left := ts.wait(50 * time.Millisecond); !slices.Equal(left, []string{"leftovers ×1", "stop ×2"}) {
		t.Fatalf("wait named %v, want the two stops and the leftovers", left)
	}
	done := make(chan []string)
	go func() { done <- ts.wait(time.Minute) }()
	close(release)
	select {
	case left := <-done:
		if left != nil {
			t.Fatalf("every task ended: wait names %v", left)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("wait did not return when the last task ended")
	}
	// Idle again, it can be used again.
	ts.Go("again", func() {})
	if left := ts.wait(30 * time.Second); left != nil {
		t.Fatalf("wait named %v after the last task ended", left)
	}
}

package lockfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Two opens of one file stand for two processes: flock and LockFileEx both
// lock per open file, not per process.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()
	if err := TryLock(a); err != nil {
		t.Fatalf("TryLock(first): %v", err)
	}
	if err := TryLock(b); !errors.Is(err, ErrHeld) {
		t.Fatalf("TryLock(second) while held: got %v, want ErrHeld", err)
	}
	if err := Unlock(a); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := TryLock(b); err != nil {
		t.Fatalf("TryLock(second) after Unlock: %v", err)
	}
	a.Close()
	c := open()
	if err := TryLock(c); !errors.Is(err, ErrHeld) {
		t.Fatalf("TryLock(third) while the second holds it: got %v, want ErrHeld", err)
	}
	b.Close() // closing drops the lock, as the holder's death does
	if err := Lock(c); err != nil {
		t.Fatalf("Lock after the holder closed: %v", err)
	}
}

// Free takes the lock and lets it go: false while another open holds it
// or the file is missing, true once it is let go, and it leaves the lock
// free behind it.
func TestFree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	if Free(path) {
		t.Error("Free of a missing file: true, want false")
	}
	unlock, err := Hold(path)
	if err != nil {
		t.Fatal(err)
	}
	if Free(path) {
		t.Error("Free while held: true, want false")
	}
	unlock()
	for i := range 2 { // twice: it does not keep the lock
		if !Free(path) {
			t.Errorf("Free after the unlock (call %d): false, want true", i+1)
		}
	}
}

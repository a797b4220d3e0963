package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"bidgate/internal/retry"
)

// openKeySet returns the key lookup of cfg's one key source; changed is
// called with the keys it holds (as a JWKS, in the source's order) when
// they are first read and whenever they change. recheck, when not nil,
// looks for a change at once: a fetched set also changes when a token's
// unknown kid makes keyfunc fetch it again.
func openKeySet(ctx context.Context, cfg Config, changed func(set []byte)) (keys jwt.Keyfunc, recheck func(), err error) {
	sources := 0
	for _, set := range []bool{cfg.JWKSFile != "", cfg.JWKSURL != "", len(cfg.JWKS) > 0} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return nil, nil, errors.New("token verification needs exactly one JWKS: a file, a URL or a fixed set")
	}
	switch {
	case cfg.JWKSURL != "":
		// keyfunc caches the set, refreshes it hourly and refetches on an
		// unknown kid (at most every 5 minutes), which is key rotation.
		k, err := keyfunc.NewDefaultCtx(ctx, []string{cfg.JWKSURL})
		if err != nil {
			return nil, nil, fmt.Errorf("JWKS %s: %w", cfg.JWKSURL, err)
		}
		w := &storageWatch{k: k, changed: changed}
		// A failed check changes nothing; run's checks log failures.
		_ = w.check(ctx)
		go w.run(ctx, cfg.FileCheck, cfg.Log)
		return k.Keyfunc, func() { _ = w.check(ctx) }, nil
	case cfg.JWKSFile != "":
		f := &fileKeySet{path: cfg.JWKSFile}
		if err := f.load(); err != nil {
			return nil, nil, err
		}
		set, err := marshalKeys(ctx, *f.keys.Load())
		if err != nil {
			return nil, nil, fmt.Errorf("JWKS file %s: %w", f.path, err)
		}
		changed(set)
		go f.watch(ctx, cfg.FileCheck, cfg, changed)
		return f.keyfunc, nil, nil
	}
	k, err := keyfunc.NewJWKSetJSON(cfg.JWKS)
	if err != nil {
		return nil, nil, fmt.Errorf("JWKS: %w", err)
	}
	set, err := marshalKeys(ctx, k)
	if err != nil {
		return nil, nil, fmt.Errorf("JWKS: %w", err)
	}
	changed(set)
	return k.Keyfunc, nil, nil
}

// marshalKeys is the JWKS of k's keys, in their order: the same keys read
// from differently written files give the same bytes.
func marshalKeys(ctx context.Context, k keyfunc.Keyfunc) ([]byte, error) {
	keys, err := k.Storage().KeyReadAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the keys: %w", err)
	}
	var set jwkset.JWKSMarshal
	for _, j := range keys {
		set.Keys = append(set.Keys, j.Marshal())
	}
	b, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("encode the keys: %w", err)
	}
	return b, nil
}

// fileKeySet is a JWKS file, read again whenever its content changes:
// rotating keys is writing the new set (old and new key), then, once no
// token signed by the old one is still valid, the new one alone.
type fileKeySet struct {
	path string
	raw  []byte // what was last loaded; only the watcher touches it
	keys atomic.Pointer[keyfunc.Keyfunc]
}

func (f *fileKeySet) load() error {
	raw, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("JWKS file: %w", err)
	}
	if bytes.Equal(raw, f.raw) {
		return nil
	}
	k, err := keyfunc.NewJWKSetJSON(raw)
	if err != nil {
		return fmt.Errorf("JWKS file %s: %w", f.path, err)
	}
	f.keys.Store(&k)
	f.raw = raw
	return nil
}

// watch reads the file again every interval until ctx ends. A file that
// cannot be read or parsed (half written, say) keeps the keys read before.
func (f *fileKeySet) watch(ctx context.Context, every time.Duration, cfg Config, changed func([]byte)) {
	loop := poll("reload the JWKS file", every, cfg.Log)
	_ = loop.Run(ctx, func(ctx context.Context) (bool, error) { // nil: no pass stops the loop
		before := f.raw
		if err := f.load(); err != nil {
			return false, fmt.Errorf("keeping the keys read before: %w", err)
		}
		if !bytes.Equal(before, f.raw) {
			set, err := marshalKeys(ctx, *f.keys.Load())
			if err != nil {
				set = f.raw // cannot happen with keys just parsed; any change still rekeys
			}
			changed(set)
			cfg.Log.Info("JWKS file changed; keys reloaded", "path", f.path)
		}
		return false, nil
	})
}

// poll is the loop of a key watcher: a check every interval; a failed one
// is tried again after retry's back-off, short at first (a file caught half
// written is soon whole) and never longer than every, and logged once per
// streak.
func poll(task string, every time.Duration, log *slog.Logger) retry.Loop {
	return retry.Loop{Task: task, Interval: every, Log: log,
		Backoff: retry.Backoff{Min: min(retry.DefaultMin, every), Max: every}}
}

func (f *fileKeySet) keyfunc(t *jwt.Token) (any, error) { return (*f.keys.Load()).Keyfunc(t) }

// storageWatch calls changed with the keys of a fetched JWKS when first
// read and whenever they change (keyfunc refreshes it hourly and on an
// unknown kid).
type storageWatch struct {
	k       keyfunc.Keyfunc
	changed func([]byte)

	mu   sync.Mutex
	last []byte
}

// run checks the fetched set every interval until ctx ends.
func (w *storageWatch) run(ctx context.Context, every time.Duration, log *slog.Logger) {
	loop := poll("read the fetched JWKS", every, log)
	_ = loop.Run(ctx, func(ctx context.Context) (bool, error) { return false, w.check(ctx) }) // nil: no pass stops the loop
}

// check calls changed when the set's keys differ from the last check's.
func (w *storageWatch) check(ctx context.Context) error {
	now, err := marshalKeys(ctx, w.k)
	if err != nil {
		return fmt.Errorf("the fetched JWKS: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !bytes.Equal(now, w.last) {
		w.changed(now)
	}
	w.last = now
	return nil
}

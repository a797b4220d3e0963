package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// openKeySet returns the key lookup of cfg's one key source; changed is
// called whenever the keys it holds change. recheck, when not nil, looks
// for a change at once: a fetched set also changes when a token's unknown
// kid makes keyfunc fetch it again.
func openKeySet(ctx context.Context, cfg Config, changed func()) (keys jwt.Keyfunc, recheck func(), err error) {
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
		w.check(ctx)
		go w.run(ctx, cmpDuration(cfg.FileCheck, 5*time.Second))
		return k.Keyfunc, func() { w.check(ctx) }, nil
	case cfg.JWKSFile != "":
		f := &fileKeySet{path: cfg.JWKSFile}
		if err := f.load(); err != nil {
			return nil, nil, err
		}
		go f.watch(ctx, cmpDuration(cfg.FileCheck, 5*time.Second), cfg, changed)
		return f.keyfunc, nil, nil
	}
	k, err := keyfunc.NewJWKSetJSON(cfg.JWKS)
	if err != nil {
		return nil, nil, fmt.Errorf("JWKS: %w", err)
	}
	return k.Keyfunc, nil, nil
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

func (f *fileKeySet) watch(ctx context.Context, every time.Duration, cfg Config, changed func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before := f.raw
		if err := f.load(); err != nil {
			if !failing {
				cfg.Log.Warn("JWKS file unreadable; keeping the keys read before", "path", f.path, "err", err)
			}
			failing = true
			continue
		}
		failing = false
		if !bytes.Equal(before, f.raw) {
			changed()
			cfg.Log.Info("JWKS file changed; keys reloaded", "path", f.path)
		}
	}
}

func (f *fileKeySet) keyfunc(t *jwt.Token) (any, error) { return (*f.keys.Load()).Keyfunc(t) }

// storageWatch calls changed whenever the keys of a fetched JWKS change
// (keyfunc refreshes it hourly and on an unknown kid).
type storageWatch struct {
	k       keyfunc.Keyfunc
	changed func()

	mu   sync.Mutex
	last []byte
}

func (w *storageWatch) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.check(ctx)
		}
	}
}

func (w *storageWatch) check(ctx context.Context) {
	keys, err := w.k.Storage().KeyReadAll(ctx)
	if err != nil {
		return
	}
	var set jwkset.JWKSMarshal
	for _, j := range keys {
		set.Keys = append(set.Keys, j.Marshal())
	}
	now, err := json.Marshal(set)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last != nil && !bytes.Equal(now, w.last) {
		w.changed()
	}
	w.last = now
}

func cmpDuration(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

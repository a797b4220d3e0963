package settings

import "bidgate/persist/pgstore"

// Postgres is where PostgreSQL is and, for a command that keeps a pool,
// the pool's size.
type Postgres struct {
	pgstore.Config
}

// Register adds --postgres-url and --postgres-conns, and their check.
func (p *Postgres) Register(fs *FlagSet) {
	p.RegisterURL(fs)
	fs.IntVar(&p.MaxConns, "postgres-conns", pgstore.DefaultConfig().MaxConns, "PostgreSQL pool size")
	fs.Check(func() error { return p.Config.Validate() }, map[string]string{"MaxConns": "postgres-conns"})
}

// RegisterURL adds --postgres-url alone, for a command that sizes its own
// pool.
func (p *Postgres) RegisterURL(fs *FlagSet) {
	fs.StringVar(&p.URL, "postgres-url", pgstore.DefaultConfig().URL, "PostgreSQL connection URL")
}

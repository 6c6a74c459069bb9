package cli

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
	"github.com/erpsync/erpsync/internal/secret"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
)

// target is one source of one entity that a command works on: the
// entity, the source, the job that writes it (its lock, checkpoint and
// history) and the entity's table. Without a config file there is one,
// the built-in memberships entity under --job.
type target struct {
	ent   *entity.Entity
	src   entity.Source
	job   string
	table *store.Table
	erp   source // set by connect
	st    *store.Store
}

// owner is the job that owns t's table (one table, one job): t's job, or
// for an entity of several sources, the entity (each source's job writes
// its own rows of the one table).
func (t *target) owner() string {
	if len(t.ent.Sources) > 1 {
		return t.ent.Name
	}
	return t.job
}

// entityFlags: --config and --entity, for the commands that work on
// entities.
func (s *settings) entityFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.ConfigFile, "config", "", "a config file of entities to sync (docs/entities.md); default: the built-in memberships entity")
	fs.Var((*listValue)(&s.Entities), "entity", "only these entities of --config (repeatable, or comma-separated); default: every entity")
}

// listValue is a repeatable, comma-separated flag.
type listValue []string

func (l *listValue) String() string { return strings.Join(*l, ",") }

func (l *listValue) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(*l, p) {
			*l = append(*l, p)
		}
	}
	return nil
}

// loadTargets reads the --config file, fills the ERP settings the flags
// and the environment left unset from its erp block, and the database
// from its database block (applyFileDatabase), and returns the targets of
// the entities --entity selects. Without a file it returns the built-in
// memberships entity's. Every error is a usage error: one line, exit 2,
// nothing written.
func (s *settings) loadTargets(fs *flag.FlagSet) ([]*target, error) {
	if s.ConfigFile == "" {
		if len(s.Entities) > 0 && (len(s.Entities) > 1 || s.Entities[0] != syncer.MembershipsEntity) {
			return nil, usageError{fmt.Errorf("--entity %s: without --config the only entity is memberships", strings.Join(s.Entities, ","))}
		}
		ent := entity.Memberships()
		return []*target{{ent: ent, src: ent.Sources[0], job: s.Job, table: store.Memberships()}}, nil
	}
	f, err := entity.Load(s.ConfigFile)
	if err != nil {
		return nil, usageError{err}
	}
	s.file = f
	if err := s.applyFileERP(fs, f); err != nil {
		return nil, usageError{err}
	}
	if err := s.applyFileDatabase(fs, f); err != nil {
		return nil, err
	}
	ents := f.Entities
	if len(s.Entities) > 0 {
		ents = nil
		for _, name := range s.Entities {
			e := f.Entity(name)
			if e == nil {
				var names []string
				for _, e := range f.Entities {
					names = append(names, e.Name)
				}
				return nil, usageError{fmt.Errorf("--entity %s: %s declares no such entity (it has %s)", name, f.Path, strings.Join(names, ", "))}
			}
			ents = append(ents, e)
		}
	}
	var out []*target
	for _, e := range ents {
		t, err := store.Compile(e)
		if err != nil {
			return nil, usageError{fmt.Errorf("%s:%d: %w", f.Path, e.Line, err)}
		}
		for _, src := range e.Sources {
			out = append(out, &target{ent: e, src: src, job: jobOf(s, e, src), table: t})
		}
	}
	jobs := map[string]*target{}
	for _, t := range out {
		if o, dup := jobs[strings.ToLower(t.job)]; dup {
			return nil, usageError{fmt.Errorf("%s:%d: entity %s: its job %s is the job %s of entity %s (line %d) for the database: give --job another name",
				f.Path, t.ent.Line, t.ent.Name, t.job, o.job, o.ent.Name, o.ent.Line)}
		}
		jobs[strings.ToLower(t.job)] = t
	}
	return out, nil
}

// jobOf is the job of one source of an entity (entity.Entity.Job): the
// entity's name (the memberships entity keeps --job, so a file that
// declares it continues the built-in job's checkpoint and history),
// followed, for an entity of several sources, by the constants it sets
// (customers/1000).
func jobOf(s *settings, e *entity.Entity, src entity.Source) string {
	job := e.Name
	if e.Name == syncer.MembershipsEntity {
		job = s.Job
	}
	return e.Job(job, src)
}

// applyFileERP sets the ERP flags that neither the command line nor the
// environment gave from the file's erp block: flags and variables win
// over the file.
func (s *settings) applyFileERP(fs *flag.FlagSet, f *entity.File) error {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	e := f.ERP
	set := func(name, v string) error {
		if v == "" || given[name] || fs.Lookup(name) == nil {
			return nil
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s:%d: erp: %s: %w", f.Path, e.Line, name, err)
		}
		return nil
	}
	secretFrom := func(name, v, file string) error {
		if file != "" && v == "" && !given[name] && !given[name+"-file"] {
			b, err := secret.ReadFile(file)
			if err != nil {
				return fmt.Errorf("%s:%d: erp: %w", f.Path, e.Line, err)
			}
			v = b
		}
		if v != "" && !given[name] {
			redact(fs, v)
		}
		return set(name, v)
	}
	errs := []error{
		set("erp-kind", e.Kind), set("erp-url", e.URL), set("erp-username", e.Username),
		secretFrom("erp-password", e.Password, e.PasswordFile), secretFrom("erp-token", e.Token, e.TokenFile),
		set("erp-paging", e.Paging), set("erp-odata", e.OData), set("erp-tls-ca", e.TLSCA),
	}
	if e.Timeout > 0 {
		errs = append(errs, set("erp-timeout", e.Timeout.String()))
	}
	if e.Retries != nil {
		errs = append(errs, set("erp-retries", strconv.Itoa(*e.Retries)))
	}
	if o := e.OAuth; o != nil {
		errs = append(errs, set("erp-oauth-token-url", o.TokenURL), set("erp-oauth-client-id", o.ClientID),
			secretFrom("erp-oauth-client-secret", o.ClientSecret, o.ClientSecretFile), set("erp-oauth-scope", o.Scope))
	}
	return errors.Join(errs...)
}

// typedSource returns the ERP source of one target of a config file: its
// entity's typed decoder on its source, an entity set of the OData service
// root --erp-url, or a REST records path with the shape of the entity's
// rest block over the flags'. Errors name the file's line or the flag.
func (e *erpSettings) typedSource(cfg erp.Config, rest restSettings, t *target) (source, error) {
	sch, err := erp.Compile(t.ent, t.src)
	if err != nil {
		return nil, fmt.Errorf("entity %s: %w", t.ent.Name, err)
	}
	if err := e.auth(&cfg); err != nil {
		return nil, err
	}
	switch e.Kind {
	case kindREST:
		if r := t.ent.REST; r != nil {
			for dst, v := range map[*string]string{&rest.RecordsPath: r.RecordsPath, &rest.CursorPath: r.CursorPath,
				&rest.Path: r.Path, &rest.CountField: r.CountField, &rest.Params: r.Params, &rest.Paging: r.Paging} {
				if v != "" {
					*dst = v
				}
			}
			if r.HasCountPath {
				rest.CountPath = r.CountPath
			}
		}
		// The source is the records path; a bare name is a resource of
		// the erpsync ERP API, as memberships is.
		rest.Path = t.ent.RESTPath(t.src)
		if t.ent.REST == nil || !t.ent.REST.HasCountPath {
			rest.CountPath = rest.Path + "/count"
		}
		shape, err := rest.shape(kindREST)
		if err != nil {
			return nil, fmt.Errorf("entity %s: %w", t.ent.Name, err)
		}
		// The REST API writes a version as a JSON integer (only OData's
		// Edm.Int64 comes as a string).
		cfg.Shape, cfg.Schema, cfg.Mapping = shape, sch.IntegerVersion(), nil
		if len(t.src.Params) > 0 {
			cfg.Filter = url.Values{}
			for k, v := range t.src.Params {
				cfg.Filter.Set(k, v)
			}
		}
		c, err := erp.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("entity %s: %w", t.ent.Name, err)
		}
		return c, nil
	case kindOData:
		if e.Paging != odata.PagingKeyset && e.Paging != odata.PagingServer {
			return nil, fmt.Errorf("--erp-paging %q: want %s or %s", e.Paging, odata.PagingKeyset, odata.PagingServer)
		}
		if len(t.src.Params) > 0 {
			return nil, fmt.Errorf("entity %s: source %s (line %d): params: only for --erp-kind rest: an OData source is filtered on the constants it sets", t.ent.Name, t.src.Name, t.src.Line)
		}
		// The entity set goes before the service root's own query
		// (sap-client=100), which every request carries.
		root, query, _ := strings.Cut(cfg.BaseURL, "?")
		u := strings.TrimSuffix(root, "/") + "/" + t.src.Name
		if query != "" {
			u += "?" + query
		}
		// Another source of the entity set: its constants must be filtered.
		var shared int
		for _, o := range t.ent.Sources {
			if o.Name == t.src.Name {
				shared++
			}
		}
		s, err := odata.New(odata.Config{URL: u, Schema: sch, Paging: e.Paging, Version: e.OData, HTTP: cfg, Shared: shared > 1})
		if err != nil {
			return nil, fmt.Errorf("entity %s: %w", t.ent.Name, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("--erp-kind %q: want %s or %s", e.Kind, kindREST, kindOData)
}

// entities returns the distinct entities of the targets, in order; the
// built-in memberships entity when there are none.
func (s *settings) entityList() []*entity.Entity {
	if s.targets == nil {
		return []*entity.Entity{entity.Memberships()}
	}
	var out []*entity.Entity
	for _, t := range s.targets {
		if !slices.Contains(out, t.ent) {
			out = append(out, t.ent)
		}
	}
	return out
}

// parseEntities is parse for a command that works on entities: it also
// loads --config and selects the --entity targets.
func (s *settings) parseEntities(fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	ts, err := s.loadTargets(fs)
	if err != nil {
		return err
	}
	s.targets = ts
	return nil
}

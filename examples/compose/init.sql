-- Runs once, when the postgres container initialises an empty data directory
-- (/docker-entrypoint-initdb.d). The demo table replicated by examples/compose/laredo.conf.
CREATE TABLE IF NOT EXISTS public.demo_items (
    id         bigint PRIMARY KEY,
    name       text NOT NULL,
    price      numeric(10, 2),
    tags       text[] NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO public.demo_items (id, name, price)
SELECT g, 'item ' || g, g * 1.5
FROM generate_series(1, 1000) AS g
ON CONFLICT (id) DO NOTHING;

-- The laredo role is the image's superuser (POSTGRES_USER), so it may replicate and create the publication.
-- With a less privileged role instead: ALTER ROLE <role> REPLICATION; and make it the table's owner, or
-- create the publication here (CREATE PUBLICATION laredo_pg_pub FOR TABLE public.demo_items) and set
-- sources.pg.publication.create = false.

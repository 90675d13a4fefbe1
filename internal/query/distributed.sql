-- Whether effectd runs in the distributed mode: effectd.citus has its row
-- (migrations.Distribute). Reads whose single-node statement Citus cannot
-- plan ask it first.
SELECT EXISTS (SELECT 1 FROM effectd.citus)

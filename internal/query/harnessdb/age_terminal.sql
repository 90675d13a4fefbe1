-- Installs a trigger that dates an intent's updated_at back by a number of
-- milliseconds (formatted into the body before it runs) when it becomes SENT,
-- FAILED, SKIPPED or CANCELLED, so that the pruner deletes it that much
-- sooner than its retention says.
CREATE FUNCTION public.bench_age_terminal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := NEW.updated_at - interval '%d milliseconds';
    RETURN NEW;
END $$;
CREATE TRIGGER bench_age_terminal BEFORE UPDATE OF status ON effectd.intents FOR EACH ROW
    WHEN (NEW.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION public.bench_age_terminal();

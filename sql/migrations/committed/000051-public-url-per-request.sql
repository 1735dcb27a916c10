--! Previous: sha1:5e54587f1094d9fa5913c8293659a1ec089ff4cf
--! Hash: sha1:bffbc329e80631f9af8d26da8f9f4f711534a7e7
--! Message: public-url-per-request

--! split: 900-common.sql
-- Made by `npm run db -- areas --diff` from sql/areas/common.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION private.public_url()
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce(nullif(current_setting('request.public_url', true), ''),
                    (select s.value from private.service_settings s where s.name = 'public_url'),
                    'http://localhost:3000')
  $function$;

set local check_function_bodies to default;

comment on function private.public_url() is 'PUBLIC_URL of the gateway the request came through (request.public_url, set by each transaction); outside a request (jobs) as the gateway last recorded it; http://localhost:3000 before any gateway started.';

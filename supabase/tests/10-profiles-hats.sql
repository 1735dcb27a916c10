-- The hat limit follows the user's subscription plan, for any insert path.
begin;
select plan(6);

select tests.create_user('hatter');
select tests.authenticate_as('hatter');
select lives_ok($$select api.hat_create('one', 'social')$$, 'first hat');
select lives_ok($$select api.hat_create('two', 'professional')$$, 'second hat');
select lives_ok($$select api.hat_create('three', 'founder')$$, 'third hat');
select throws_ok($$select api.hat_create('four', 'social')$$, 'PT422', null, 'a basic user cannot wear a fourth hat');

reset role;
select throws_ok(
  $$insert into app.hats (user_id, name, hat_type) values (tests.user_id('hatter'), 'owner', 'social')$$,
  'PT422', null, 'the limit holds for the table owner too (trigger, not API)');

update app.subscription_plans set max_hats = 4 where id = 'basic';
select lives_ok(
  $$insert into app.hats (user_id, name, hat_type) values (tests.user_id('hatter'), 'four', 'social')$$,
  'raising the plan''s max_hats raises the limit');

select * from finish();
rollback;

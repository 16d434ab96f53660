//! Drives a live Postwire server with the official `resend-rs` crate: every call the crate offers
//! for contact properties, segments, topics, contacts (imports included), templates and
//! broadcasts, plus emails sent with a template (alone and in a batch) and a plain one.
//!
//! Usage: `postwire-sdk-rust-check BASE_URL API_KEY FROM_DOMAIN` (FROM_DOMAIN verified for the
//! key's team). Prints `ok <call>` or `FAIL <call>: <error>` for each call, and `id <name> <id>`
//! for the resources the caller checks again over raw HTTP; exits 1 when any call failed.

use std::collections::HashMap;
use std::error::Error as _;
use std::future::Future;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use resend_rs::list_opts::ListOptions;
use resend_rs::types::{
    BroadcastRecipientEventType, ContactChanges, ContactImportColumnMap, ContactImportOnConflict,
    ContactImportStatus, ContactPropertyChanges, CreateBroadcastOptions,
    CreateContactImportOptions, CreateContactOptions, CreateContactPropertyOptions,
    CreateEmailBaseOptions, CreateTemplateOptions, CreateTopicOptions, EmailTemplate,
    ListRecipientsOptions, PropertyType, SendBroadcastOptions, SubscriptionType, TemplateEvent,
    TopicVisibility, UpdateBroadcastOptions, UpdateContactTopicOptions, UpdateTemplateOptions,
    UpdateTopicOptions, Variable, VariableType,
};
use resend_rs::{json, Config, Error, Resend};

/// Counts failures and prints one line per call.
struct Run {
    failures: usize,
}

impl Run {
    /// Awaits one SDK call; `check` looks at a successful answer and may still fail the call.
    async fn call<T, F>(
        &mut self,
        name: &str,
        call: F,
        check: impl FnOnce(&T) -> Result<(), String>,
    ) -> Option<T>
    where
        F: Future<Output = resend_rs::Result<T>>,
    {
        match call.await {
            Ok(answer) => match check(&answer) {
                Ok(()) => {
                    println!("ok {name}");
                    Some(answer)
                }
                Err(problem) => {
                    self.fail(name, &problem);
                    None
                }
            },
            Err(error) => {
                self.fail(name, &describe(&error));
                None
            }
        }
    }

    /// A call that cannot be made because one it needs failed: a failure too.
    fn not_run(&mut self, name: &str, needs: &str) {
        self.fail(name, &format!("not run, needs {needs}"));
    }

    fn fail(&mut self, name: &str, problem: &str) {
        self.failures += 1;
        println!("FAIL {name}: {}", problem.replace('\n', " "));
    }
}

/// The error with its causes (a parse error's cause names the missing or mistyped key) and, for
/// an error answer, its HTTP status.
fn describe(error: &Error) -> String {
    if let Error::Resend(answer) = error {
        return format!("{} {answer}", answer.status_code);
    }
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        // reqwest repeats its cause's text in its own: show each text once.
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        cause = inner.source();
    }
    text
}

fn expect(condition: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(what())
    }
}

fn print_id(name: &str, id: &str) {
    println!("id {name} {id}");
}

const ADA: &str = "ada.lovelace@example.org";
const GRACE: &str = "grace.hopper@example.org";
const IMPORTED: &str = "imported.reader@example.org";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, base_url, api_key, domain] = args.as_slice() else {
        eprintln!("usage: postwire-sdk-rust-check BASE_URL API_KEY FROM_DOMAIN");
        return ExitCode::from(2);
    };
    let base_url = match base_url.parse() {
        Ok(url) => url,
        Err(error) => {
            eprintln!("bad BASE_URL {base_url}: {error}");
            return ExitCode::from(2);
        }
    };
    let resend = Resend::with_config(Config::builder(api_key.as_str()).base_url(base_url).build());
    let from = format!("Rust SDK <news@{domain}>");
    let mut run = Run { failures: 0 };

    let properties = contact_properties(&mut run, &resend).await;
    let segments = segments(&mut run, &resend).await;
    let topic = topics(&mut run, &resend).await;
    let ada = contacts(&mut run, &resend, segments.as_ref(), topic.as_deref()).await;
    imports(&mut run, &resend, segments.as_ref()).await;
    templates(&mut run, &resend, &from).await;
    broadcasts(&mut run, &resend, &from, segments.as_ref()).await;
    emails(&mut run, &resend, &from).await;
    clean_up(&mut run, &resend, ada, topic, segments, properties).await;

    let _ = std::io::stdout().flush();
    if run.failures == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("{} call(s) failed", run.failures);
        ExitCode::FAILURE
    }
}

/// Ids of the two contact properties: `plan` (string) and `seats` (number, deleted at the end).
struct Properties {
    seats: String,
}

async fn contact_properties(run: &mut Run, resend: &Resend) -> Option<Properties> {
    let contacts = &resend.contacts;
    let plan =
        CreateContactPropertyOptions::new("plan", PropertyType::String).with_fallback("free");
    let plan = run
        .call(
            "contacts.create_property",
            contacts.create_property(plan),
            |_| Ok(()),
        )
        .await;
    let seats = CreateContactPropertyOptions::new("seats", PropertyType::Number).with_fallback(1);
    let seats = run
        .call(
            "contacts.create_property number",
            contacts.create_property(seats),
            |_| Ok(()),
        )
        .await;
    let Some(plan) = plan else {
        for name in ["get_property", "update_property", "list_properties"] {
            run.not_run(&format!("contacts.{name}"), "contacts.create_property");
        }
        return None;
    };
    run.call(
        "contacts.get_property",
        contacts.get_property(&plan.id),
        |property| {
            expect(
                property.key == "plan"
                    && property.r#type == PropertyType::String
                    && property.fallback_value == Some(json!("free")),
                || format!("answered {property:?}"),
            )
        },
    )
    .await;
    let changes = ContactPropertyChanges::default().with_fallback("basic");
    run.call(
        "contacts.update_property",
        contacts.update_property(&plan.id, changes),
        |answer| {
            expect(*answer.id == *plan.id, || {
                format!("answered id {}", answer.id)
            })
        },
    )
    .await;
    run.call(
        "contacts.list_properties",
        contacts.list_properties(ListOptions::default()),
        |list| {
            expect(
                list.data
                    .iter()
                    .any(|p| p.id == plan.id && p.fallback_value == Some(json!("basic"))),
                || format!("plan with fallback basic not listed: {:?}", list.data),
            )
        },
    )
    .await;
    Some(Properties {
        seats: seats?.id.to_string(),
    })
}

/// The main segment (kept, the broadcast's) and a second one (deleted at the end).
struct Segments {
    main: String,
    second: Option<String>,
}

async fn segments(run: &mut Run, resend: &Resend) -> Option<Segments> {
    let svc = &resend.segments;
    let created = run
        .call(
            "segments.create",
            svc.create("Rust SDK readers"),
            |segment| {
                expect(segment.name == "Rust SDK readers", || {
                    format!("answered {segment:?}")
                })
            },
        )
        .await;
    let Some(created) = created else {
        for name in ["get", "update", "list"] {
            run.not_run(&format!("segments.{name}"), "segments.create");
        }
        return None;
    };
    let id = created.id.to_string();
    print_id("segment", &id);
    run.call("segments.get", svc.get(&id), |segment| {
        expect(segment.name == "Rust SDK readers", || {
            format!("answered {segment:?}")
        })
    })
    .await;
    run.call(
        "segments.update",
        svc.update(&id, "Rust SDK readers (all)"),
        |answer| expect(*answer.id == *id, || format!("answered id {}", answer.id)),
    )
    .await;
    run.call("segments.list", svc.list(ListOptions::default()), |list| {
        expect(list.data.iter().any(|s| *s.id == *id), || {
            "segment not listed".to_owned()
        })
    })
    .await;
    let second = run
        .call(
            "segments.create second",
            svc.create("Rust SDK second"),
            |_| Ok(()),
        )
        .await
        .map(|segment| segment.id.to_string());
    Some(Segments { main: id, second })
}

async fn topics(run: &mut Run, resend: &Resend) -> Option<String> {
    let svc = &resend.topics;
    let topic = CreateTopicOptions::new("Rust SDK news", SubscriptionType::OptIn)
        .with_description("Monthly news".to_owned())
        .with_visibility(TopicVisibility::Public);
    let Some(created) = run
        .call("topics.create", svc.create(topic), |_| Ok(()))
        .await
    else {
        for name in ["get", "update", "list"] {
            run.not_run(&format!("topics.{name}"), "topics.create");
        }
        return None;
    };
    let id = created.id.to_string();
    print_id("topic", &id);
    run.call("topics.get", svc.get(&id), |topic| {
        expect(
            topic.name == "Rust SDK news"
                && topic.default_subscription == SubscriptionType::OptIn
                && topic.visibility == TopicVisibility::Public
                && topic.description.as_deref() == Some("Monthly news"),
            || format!("answered {topic:?}"),
        )
    })
    .await;
    // The crate sends `"name": null` when the name is left unchanged.
    let update = UpdateTopicOptions::new()
        .with_description("Monthly news, and releases")
        .with_visibility(TopicVisibility::Private);
    run.call("topics.update", svc.update(&id, update), |answer| {
        expect(*answer.id == *id, || format!("answered id {}", answer.id))
    })
    .await;
    run.call("topics.list", svc.list(ListOptions::default()), |list| {
        expect(
            list.data
                .iter()
                .any(|t| *t.id == *id && t.visibility == TopicVisibility::Private),
            || format!("updated topic not listed: {:?}", list.data),
        )
    })
    .await;
    Some(id)
}

/// Every contact call but imports; answers Ada's contact id (deleted at the end).
async fn contacts(
    run: &mut Run,
    resend: &Resend,
    segments: Option<&Segments>,
    topic: Option<&str>,
) -> Option<String> {
    let svc = &resend.contacts;
    let mut ada = CreateContactOptions::new(ADA)
        .with_first_name("Ada")
        .with_last_name("Lovelace")
        .with_unsubscribed(false)
        .with_property("plan", "pro");
    if let Some(segments) = segments {
        ada = ada.with_segment(&segments.main);
    }
    if let Some(topic) = topic {
        ada = ada.with_topic(UpdateContactTopicOptions::new(
            topic,
            SubscriptionType::OptIn,
        ));
    }
    let id = run
        .call("contacts.create", svc.create(ada), |_| Ok(()))
        .await?
        .to_string();
    print_id("contact", &id);

    // An audience id sends the create to the legacy path /audiences/{id}/contacts.
    match segments {
        Some(segments) => {
            let grace = CreateContactOptions::new(GRACE)
                .with_first_name("Grace")
                .with_audience_id(&segments.main);
            run.call(
                "contacts.create with_audience_id",
                svc.create(grace),
                |_| Ok(()),
            )
            .await;
        }
        None => run.not_run("contacts.create with_audience_id", "segments.create"),
    }

    run.call("contacts.get by id", svc.get(&id), |contact| {
        let plan = contact.properties.as_ref().and_then(|p| p.get("plan"));
        expect(
            contact.email == ADA
                && contact.first_name.as_deref() == Some("Ada")
                && contact.last_name.as_deref() == Some("Lovelace")
                && !contact.unsubscribed
                && plan.is_some_and(|p| p.value == "pro" && p.r#type == PropertyType::String),
            || format!("answered {contact:?}"),
        )
    })
    .await;
    run.call("contacts.get by email", svc.get(ADA), |contact| {
        expect(*contact.id == *id, || format!("answered {contact:?}"))
    })
    .await;
    let changes = ContactChanges::new()
        .with_first_name("Augusta Ada")
        .with_property("plan", "team")
        .with_properties(HashMap::from([("seats".to_owned(), 3)]));
    run.call(
        "contacts.update by email",
        svc.update(ADA, changes),
        |answer| expect(*answer.id == *id, || format!("answered id {}", answer.id)),
    )
    .await;
    run.call("contacts.get after update", svc.get(&id), |contact| {
        expect(contact.first_name.as_deref() == Some("Augusta Ada"), || {
            format!("answered {contact:?}")
        })
    })
    .await;
    run.call("contacts.list", svc.list(ListOptions::default()), |list| {
        let listed = |email: &str| list.data.iter().any(|c| c.email == email);
        expect(listed(ADA) && listed(GRACE), || {
            format!("answered {:?}", list.data)
        })
    })
    .await;
    let first = run.call(
        "contacts.list with limit",
        svc.list(ListOptions::default().with_limit(1)),
        |list| {
            expect(list.data.len() == 1 && list.has_more, || {
                format!("answered {list:?}")
            })
        },
    );
    if let Some(first) = first.await {
        let after = ListOptions::default()
            .with_limit(1)
            .list_after(&first.data[0].id);
        run.call("contacts.list after a cursor", svc.list(after), |list| {
            expect(
                list.data.len() == 1 && list.data[0].id != first.data[0].id,
                || format!("answered {list:?}"),
            )
        })
        .await;
    }

    match topic {
        Some(topic) => {
            let topics = svc.get_contact_topics(&id, ListOptions::default());
            run.call("contacts.get_contact_topics", topics, |list| {
                expect(
                    list.data
                        .iter()
                        .any(|t| *t.id == *topic && t.subscription == SubscriptionType::OptIn),
                    || format!("answered {:?}", list.data),
                )
            })
            .await;
            let choice = [UpdateContactTopicOptions::new(
                topic,
                SubscriptionType::OptOut,
            )];
            run.call(
                "contacts.update_contact_topics",
                svc.update_contact_topics(&id, choice),
                |_| Ok(()),
            )
            .await;
            let topics = svc.get_contact_topics(ADA, ListOptions::default());
            run.call("contacts.get_contact_topics after update", topics, |list| {
                expect(
                    list.data
                        .iter()
                        .any(|t| *t.id == *topic && t.subscription == SubscriptionType::OptOut),
                    || format!("answered {:?}", list.data),
                )
            })
            .await;
        }
        None => {
            for name in ["get_contact_topics", "update_contact_topics"] {
                run.not_run(&format!("contacts.{name}"), "topics.create");
            }
        }
    }

    match segments {
        Some(Segments {
            main,
            second: Some(second),
        }) => {
            run.call(
                "contacts.add_contact_segment",
                svc.add_contact_segment(&id, second),
                |a| expect(*a.id == **second, || format!("answered id {}", a.id)),
            )
            .await;
            let listed = svc.list_contact_segment(&id, ListOptions::default());
            run.call("contacts.list_contact_segment", listed, |list| {
                let listed = |sid: &str| list.data.iter().any(|s| *s.id == *sid);
                expect(listed(main) && listed(second), || {
                    format!("answered {:?}", list.data)
                })
            })
            .await;
            let removed = svc.delete_contact_segment(ADA, second);
            run.call("contacts.delete_contact_segment", removed, |answer| {
                expect(answer.deleted && *answer.id == **second, || {
                    format!("answered {answer:?}")
                })
            })
            .await;
            let members = resend.segments.list_contacts(main, ListOptions::default());
            run.call("segments.list_contacts", members, |list| {
                let listed = |email: &str| list.data.iter().any(|c| c.email == email);
                expect(listed(ADA) && listed(GRACE), || {
                    format!("answered {:?}", list.data)
                })
            })
            .await;
            let members = resend
                .segments
                .list_contacts(second, ListOptions::default());
            run.call("segments.list_contacts after removal", members, |list| {
                expect(list.data.is_empty(), || format!("answered {:?}", list.data))
            })
            .await;
        }
        _ => {
            for name in [
                "contacts.add_contact_segment",
                "contacts.list_contact_segment",
                "contacts.delete_contact_segment",
                "segments.list_contacts",
            ] {
                run.not_run(name, "segments.create");
            }
        }
    }

    run.call("contacts.delete by email", svc.delete(GRACE), |deleted| {
        expect(*deleted, || "answered deleted: false".to_owned())
    })
    .await;
    Some(id)
}

async fn imports(run: &mut Run, resend: &Resend, segments: Option<&Segments>) {
    let svc = &resend.contacts;
    let path = std::env::temp_dir().join(format!("postwire-rust-sdk-{}.csv", std::process::id()));
    let csv = format!("Email,Given name,Plan\n{IMPORTED},Imogen,pro\nnot an address,Bad,pro\n");
    if let Err(error) = std::fs::write(&path, csv) {
        run.fail(
            "contacts.create_import",
            &format!("writing {}: {error}", path.display()),
        );
        return;
    }
    let file = std::fs::File::open(&path);
    let _ = std::fs::remove_file(&path);
    let Ok(file) = file else {
        run.fail("contacts.create_import", "could not reopen the CSV file");
        return;
    };
    let columns = ContactImportColumnMap::new()
        .with_email("Email")
        .with_first_name("Given name");
    let mut options = CreateContactImportOptions::new()
        .with_column_map(columns)
        .with_on_conflict(ContactImportOnConflict::Upsert);
    if let Some(segments) = segments {
        options = options.with_segment(&segments.main);
    }
    let created = run.call(
        "contacts.create_import",
        svc.create_import(file, options),
        |_| Ok(()),
    );
    let Some(created) = created.await else {
        run.not_run("contacts.get_import", "contacts.create_import");
        run.not_run("contacts.list_imports", "contacts.create_import");
        return;
    };
    let id = created.id.to_string();
    print_id("import", &id);

    // The import runs in the background: read it until it finishes.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut finished = None;
    let mut failure = None;
    while Instant::now() < deadline {
        match svc.get_import(&id).await {
            Ok(import)
                if matches!(
                    import.status,
                    ContactImportStatus::Queued | ContactImportStatus::InProgress
                ) =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(import) => {
                finished = Some(import);
                break;
            }
            Err(error) => {
                failure = Some(describe(&error));
                break;
            }
        }
    }
    match (finished, failure) {
        (Some(import), _) if import.status == ContactImportStatus::Completed => {
            println!("ok contacts.get_import");
        }
        (Some(import), _) => run.fail("contacts.get_import", &format!("ended {import:?}")),
        (None, Some(error)) => run.fail("contacts.get_import", &error),
        (None, None) => run.fail("contacts.get_import", "still running after 30 s"),
    }
    run.call(
        "contacts.list_imports",
        svc.list_imports(ListOptions::default()),
        |list| {
            expect(list.data.iter().any(|i| *i.id == *id), || {
                format!("answered {:?}", list.data)
            })
        },
    )
    .await;
}

async fn templates(run: &mut Run, resend: &Resend, from: &str) {
    let svc = &resend.templates;
    let alias = "rust-sdk-welcome";
    let template = CreateTemplateOptions::new("Rust SDK welcome", "<p>Hello {{{NAME}}}</p>")
        .with_alias(alias)
        .with_from(from)
        .with_subject("Welcome, {{{NAME}}}")
        .with_reply_to("replies@example.org")
        .with_variable(Variable::new("NAME", VariableType::String));
    let Some(created) = run
        .call("templates.create", svc.create(template), |_| Ok(()))
        .await
    else {
        for name in ["get", "update", "publish", "duplicate", "list", "delete"] {
            run.not_run(&format!("templates.{name}"), "templates.create");
        }
        run.not_run("emails.send with_template", "templates.create");
        return;
    };
    let id = created.id.to_string();
    print_id("template", &id);
    run.call("templates.get by id", svc.get(&id), |template| {
        expect(
            template.alias.as_deref() == Some(alias)
                && template.status == TemplateEvent::Draft
                && template.variables.iter().any(|v| v.key == "NAME"),
            || format!("answered {template:?}"),
        )
    })
    .await;
    run.call("templates.get by alias", svc.get(alias), |template| {
        expect(*template.id == *id, || format!("answered {template:?}"))
    })
    .await;
    let update = UpdateTemplateOptions::new(
        "Rust SDK welcome",
        "<p>Hello {{{NAME}}}, you have {{{SEATS}}} seats</p>",
    )
    .with_subject("Welcome, {{{NAME}}}")
    .with_text("Hello {{{NAME}}}, you have {{{SEATS}}} seats")
    .with_variables(&[
        Variable::new("NAME", VariableType::String),
        Variable::new("SEATS", VariableType::Number).with_fallback(1),
    ]);
    run.call("templates.update", svc.update(&id, update), |answer| {
        expect(*answer.id == *id, || format!("answered id {}", answer.id))
    })
    .await;
    run.call("templates.publish", svc.publish(alias), |answer| {
        expect(*answer.id == *id, || format!("answered id {}", answer.id))
    })
    .await;
    run.call("templates.get after publish", svc.get(&id), |template| {
        expect(
            template.status == TemplateEvent::Published && template.published_at.is_some(),
            || format!("answered {template:?}"),
        )
    })
    .await;
    let copy = run.call("templates.duplicate", svc.duplicate(&id), |answer| {
        expect(*answer.id != *id, || {
            "the copy has the original's id".to_owned()
        })
    });
    let copy = copy.await.map(|answer| answer.id.to_string());
    run.call("templates.list", svc.list(ListOptions::default()), |list| {
        let listed = |tid: &str| list.data.iter().any(|t| *t.id == *tid);
        expect(listed(&id) && copy.as_deref().is_none_or(listed), || {
            format!("answered {:?}", list.data)
        })
    })
    .await;

    let email = CreateEmailBaseOptions::new(from, [ADA], "Welcome aboard")
        .with_template(EmailTemplate::new(&id).with_variable("NAME", json!("Ada")));
    let sent = run.call(
        "emails.send with_template",
        resend.emails.send(email),
        |_| Ok(()),
    );
    if let Some(sent) = sent.await {
        print_id("template_email", &sent.id);
        run.call(
            "emails.get of the template email",
            resend.emails.get(&sent.id),
            |email| {
                let html = email.html.as_deref().unwrap_or_default();
                expect(html.contains("Hello Ada, you have 1 seats"), || {
                    format!("answered {email:?}")
                })
            },
        )
        .await;
    }
    // A batch naming the template by its alias, each email with its own variables.
    let batch = [("Grace", 2), ("Imogen", 5)].map(|(name, seats)| {
        let template = EmailTemplate::new(alias)
            .with_variable("NAME", json!(name))
            .with_variable("SEATS", json!(seats));
        CreateEmailBaseOptions::new(from, [IMPORTED], "Welcome aboard").with_template(template)
    });
    run.call(
        "batch.send with_template",
        resend.batch.send(Vec::from(batch)),
        |sent| expect(sent.len() == 2, || format!("answered {sent:?}")),
    )
    .await;

    match copy {
        Some(copy) => {
            run.call("templates.delete", svc.delete(&copy), |answer| {
                expect(answer.deleted && *answer.id == *copy, || {
                    format!("answered {answer:?}")
                })
            })
            .await;
        }
        None => run.not_run("templates.delete", "templates.duplicate"),
    }
    run.call("templates.delete by alias", svc.delete(alias), |answer| {
        expect(answer.deleted && *answer.id == *id, || {
            format!("answered {answer:?}")
        })
    })
    .await;
}

async fn broadcasts(run: &mut Run, resend: &Resend, from: &str, segments: Option<&Segments>) {
    let svc = &resend.broadcasts;
    let Some(segments) = segments else {
        run.not_run("broadcasts.*", "segments.create");
        return;
    };
    let segment = segments.main.as_str();
    let broadcast = CreateBroadcastOptions::new(segment, from, "News for {{{FIRST_NAME|you}}}")
        .with_name("Rust SDK broadcast")
        .with_reply("replies@example.org")
        .with_html(
            "<p>Hi {{{contact.first_name|there}}}</p>\
             <p><a href=\"{{{RESEND_UNSUBSCRIBE_URL}}}\">Unsubscribe</a></p>",
        );
    let Some(created) = run
        .call("broadcasts.create", svc.create(broadcast), |_| Ok(()))
        .await
    else {
        run.not_run("broadcasts.*", "broadcasts.create");
        return;
    };
    let id = created.id.to_string();
    print_id("broadcast", &id);
    run.call("broadcasts.get", svc.get(&id), |broadcast| {
        expect(
            broadcast.status == "draft"
                && broadcast.name == "Rust SDK broadcast"
                && *broadcast.audience_id == *segment,
            || format!("answered {broadcast:?}"),
        )
    })
    .await;
    let update = UpdateBroadcastOptions::new()
        .with_subject("Rust SDK news for {{{FIRST_NAME|you}}}")
        .with_text("Hi {{{contact.first_name|there}}}: {{{RESEND_UNSUBSCRIBE_URL}}}");
    run.call("broadcasts.update", svc.update(&id, update), |answer| {
        expect(*answer.id == *id, || format!("answered id {}", answer.id))
    })
    .await;
    run.call(
        "broadcasts.list",
        svc.list(ListOptions::default()),
        |list| {
            expect(list.data.iter().any(|b| *b.id == *id), || {
                format!("answered {:?}", list.data)
            })
        },
    )
    .await;
    let copy = run.call("broadcasts.duplicate", svc.duplicate(&id), |answer| {
        expect(*answer.id != *id, || {
            "the copy has the original's id".to_owned()
        })
    });
    match copy.await {
        Some(copy) => {
            run.call(
                "broadcasts.delete of a draft",
                svc.delete(&copy.id),
                |deleted| expect(*deleted, || "answered deleted: false".to_owned()),
            )
            .await;
        }
        None => run.not_run("broadcasts.delete of a draft", "broadcasts.duplicate"),
    }
    run.call(
        "broadcasts.send",
        svc.send(SendBroadcastOptions::new(&id)),
        |answer| expect(*answer.id == *id, || format!("answered id {}", answer.id)),
    )
    .await;
    run.call("broadcasts.get after send", svc.get(&id), |broadcast| {
        expect(broadcast.status != "draft", || {
            format!("answered {broadcast:?}")
        })
    })
    .await;
    let recipients = ListRecipientsOptions::new(BroadcastRecipientEventType::Sent).with_limit(10);
    run.call(
        "broadcasts.recipients",
        svc.recipients(&id, recipients),
        |_| Ok(()),
    )
    .await;
    run.call(
        "broadcasts.clicked_links",
        svc.clicked_links(&id, ListOptions::default()),
        |_| Ok(()),
    )
    .await;

    // Created to be sent later, then canceled before it is due. It has no name: the crate
    // still needs one (a string) in every answer that shows it.
    let later = CreateBroadcastOptions::new(segment, from, "Later news")
        .with_text("Hi {{{FIRST_NAME|there}}}")
        .with_send(true)
        .with_scheduled_at("in 1 hour");
    let Some(later) = run
        .call(
            "broadcasts.create with_send scheduled",
            svc.create(later),
            |_| Ok(()),
        )
        .await
    else {
        run.not_run("broadcasts.cancel", "broadcasts.create with_send");
        return;
    };
    print_id("canceled_broadcast", &later.id);
    run.call(
        "broadcasts.get scheduled",
        svc.get(&later.id),
        |broadcast| {
            expect(
                broadcast.status == "scheduled" && broadcast.scheduled_at.is_some(),
                || format!("answered {broadcast:?}"),
            )
        },
    )
    .await;
    run.call("broadcasts.cancel", svc.cancel(&later.id), |answer| {
        expect(*answer.id == *later.id, || {
            format!("answered id {}", answer.id)
        })
    })
    .await;
    run.call(
        "broadcasts.list with the unnamed one",
        svc.list(ListOptions::default()),
        |list| {
            expect(list.data.iter().any(|b| *b.id == *later.id), || {
                format!("answered {:?}", list.data)
            })
        },
    )
    .await;
}

async fn emails(run: &mut Run, resend: &Resend, from: &str) {
    let email = CreateEmailBaseOptions::new(from, [ADA], "Plain hello from Rust")
        .with_text("Hello")
        .with_html("<p>Hello</p>");
    let Some(sent) = run
        .call("emails.send", resend.emails.send(email), |_| Ok(()))
        .await
    else {
        run.not_run("emails.get", "emails.send");
        return;
    };
    print_id("email", &sent.id);
    run.call("emails.get", resend.emails.get(&sent.id), |email| {
        expect(
            email.subject == "Plain hello from Rust" && email.to == [ADA],
            || format!("answered {email:?}"),
        )
    })
    .await;
}

async fn clean_up(
    run: &mut Run,
    resend: &Resend,
    ada: Option<String>,
    topic: Option<String>,
    segments: Option<Segments>,
    properties: Option<Properties>,
) {
    match ada {
        Some(ada) => {
            run.call(
                "contacts.delete by id",
                resend.contacts.delete(&ada),
                |deleted| expect(*deleted, || "answered deleted: false".to_owned()),
            )
            .await;
        }
        None => run.not_run("contacts.delete by id", "contacts.create"),
    }
    match topic {
        Some(topic) => {
            run.call("topics.delete", resend.topics.delete(&topic), |answer| {
                expect(answer.deleted, || format!("answered {answer:?}"))
            })
            .await;
        }
        None => run.not_run("topics.delete", "topics.create"),
    }
    match segments.and_then(|s| s.second) {
        Some(second) => {
            run.call(
                "segments.delete",
                resend.segments.delete(&second),
                |deleted| expect(*deleted, || "answered deleted: false".to_owned()),
            )
            .await;
        }
        None => run.not_run("segments.delete", "segments.create second"),
    }
    match properties {
        Some(properties) => {
            let deleted = resend.contacts.delete_property(&properties.seats);
            run.call("contacts.delete_property", deleted, |answer| {
                expect(answer.deleted, || format!("answered {answer:?}"))
            })
            .await;
        }
        None => run.not_run(
            "contacts.delete_property",
            "contacts.create_property number",
        ),
    }
}

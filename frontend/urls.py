from django.urls import path

from .views import (
    bias,
    captions,
    dashboard,
    datasets,
    instructions,
    leaderboard,
    mturk,
    pages,
    qualification,
    releases,
    review,
    wizard,
    work,
)

app_name = "frontend"
urlpatterns = [
    path("", pages.home, name="home"),
    path("batches/<int:batch_id>/", pages.batch_page, name="batch"),
    path("batches/<int:batch_id>/bias/", bias.bias_page, name="batch-bias"),
    path("batches/<int:batch_id>/mturk/", mturk.mturk_batch, name="mturk-batch"),
    path("mturk/hits/<int:hit_id>/<str:signature>/", mturk.mturk_hit, name="mturk-hit"),
    path("mturk/submit/", mturk.mturk_submit, name="mturk-submit"),
    path("mturk/images/<int:item_id>/<str:signature>/", mturk.mturk_image, name="mturk-image"),
    path(
        "mturk/instructions/<int:instructions_id>/examples/<int:example>/<str:signature>/",
        instructions.mturk_instructions_image,
        name="mturk-instructions-image",
    ),
    path(
        "mturk/qualification-images/<int:pair_id>/<str:signature>/",
        mturk.mturk_qualification_image,
        name="mturk-qualification-image",
    ),
    path("work/", work.work_home, name="work"),
    path("work/next/", work.work_next, name="work-next"),
    path("work/assignments/<int:assignment_id>/", work.hit_page, name="hit"),
    path(
        "work/assignments/<int:assignment_id>/items/<int:item_id>/image/",
        work.item_image,
        name="item-image",
    ),
    path(
        "work/assignments/<int:assignment_id>/instructions/<int:example>/image/",
        instructions.instructions_image,
        name="instructions-image",
    ),
    path(
        "work/qualification/<int:batch_id>/",
        qualification.qualification_page,
        name="qualification",
    ),
    path(
        "work/qualification/<int:batch_id>/pairs/<int:pair_id>/image/",
        qualification.qualification_image,
        name="qualification-image",
    ),
    path("review/", review.review_list, name="review"),
    path("review/<int:assignment_id>/", review.review_detail, name="review-detail"),
    path("workers/", review.worker_list, name="workers"),
    path("workers/<int:worker_id>/block/", review.worker_block_toggle, name="worker-block"),
    path("captions/invalid/", captions.invalid_captions, name="invalid-captions"),
    path("releases/<int:release_id>/download/", releases.release_download, name="release-download"),
    path("releases/<int:release_id>/leaderboard/", leaderboard.leaderboard, name="leaderboard"),
    path(
        "releases/<int:release_id>/leaderboard/<int:evaluation_id>/explain/",
        leaderboard.explain,
        name="explain",
    ),
    path(
        "releases/<int:release_id>/leaderboard/<int:evaluation_id>/explain/images/<int:image_id>/",
        leaderboard.explain_image,
        name="explain-image",
    ),
    # The admin dashboard (staff).
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("releases/", dashboard.release_list, name="releases"),
    path("datasets/", datasets.dataset_list, name="datasets"),
    path("datasets/upload/", datasets.dataset_upload, name="dataset-upload"),
    path("datasets/<int:dataset_id>/", datasets.dataset_detail, name="dataset"),
    path("datasets/<int:dataset_id>/relevance/", datasets.relevance_page, name="dataset-relevance"),
    path("imports/<int:job_id>/", datasets.import_job_page, name="import-job"),
    path("imports/<int:job_id>/status/", datasets.import_job_status, name="import-job-status"),
    path("batches/new/", wizard.batch_new, name="batch-new"),
    path("batches/new/plan/", wizard.batch_plan_preview, name="batch-plan-preview"),
    path(
        "batches/new/instructions/",
        instructions.instructions_proposal,
        name="batch-instructions-proposal",
    ),
]
